// Baseline for problem 48 (2-D FSDP x TP SwiGLU feed-forward). PKB's steps, as it runs them:
//   1. ncclAllGather of W1_shard and of W2_shard over the FSDP group: the gathered buffer
//      [FS, H/FS, F/TP] is already torch.cat(list, dim=0) = [H, F/TP] (PyTorch's list all_gather
//      gathers into one flat buffer and copies the shards out; cat copies them back: skipped here);
//   2. ncclAllGather of W3_shard over the FSDP group into a staging buffer [FS, F/TP, H/FS], then
//      concat_columns: W3[f, s H/FS + j] = staging[s, f, j] (torch.cat along dim 1);
//   3. cuBLAS GEMMs x1 = x W1 and x2 = x W2, [BF, F/TP] in D;
//   4. silu_inplace: x1 = D(x1 / (1 + exp(-x1))) in fp32 (F.silu), then mul_inplace: x1 = D(x1 x2)
//      (the * of two D tensors): one plain kernel per PyTorch op, the same roundings;
//   5. cuBLAS GEMM y = z W3 straight into the output, [BF, H] in D (PKB's clone of y_partial is
//      the copy NCCL's in-place all-reduce makes unnecessary);
//   6. ncclAllReduce (sum) of y in place over the TP group, skipped when TP = 1 (PKB's all_reduce
//      over a one-rank group changes nothing).
// PKB creates its TP and FSDP groups with dist.new_group inside every call; here they are the
// spec's [[groups]], created by the harness before timing (communicator set-up is not the workload).
// GEMMs: D in and out, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32 for fp32, PyTorch's default).
// Scratch (gathered weights, staging, x1 and x2) is allocated in pkb_init from H, F, TP, FS and BF.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

namespace {

struct State {
  void* w1 = nullptr;       // gathered W1 slab [H, F/TP]
  void* w2 = nullptr;       // gathered W2 slab [H, F/TP]
  void* staging = nullptr;  // gathered W3 shards [FS, F/TP, H/FS]
  void* w3 = nullptr;       // W3 slab [F/TP, H]
  void* x1 = nullptr;       // [BF, F/TP]; SiLU and the product are applied in place
  void* x2 = nullptr;       // [BF, F/TP]
  size_t w_bytes = 0, act_bytes = 0;
};

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

unsigned blocks_for(int64_t n, int64_t cap) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

// dst[m, s, j] = src[s, m, j] in copy units U (16, 4 or 2 bytes), units = one shard row: blockIdx.y is
// the shard s, whose plane [rows, units] is contiguous in src.
template <typename U>
__global__ void concat_columns(const U* __restrict__ src, U* __restrict__ dst, uint32_t rows, uint32_t units) {
  const uint32_t s = blockIdx.y, shards = gridDim.y;
  const uint32_t plane = rows * units;
  const U* from = src + (size_t)s * plane;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < plane; i += gridDim.x * blockDim.x) {
    const uint32_t m = i / units, j = i - m * units;
    dst[((size_t)m * shards + s) * units + j] = from[i];
  }
}

template <typename U>
void launch_concat(const void* src, void* dst, int64_t rows, int shards, int64_t row_bytes, cudaStream_t st) {
  const uint32_t units = (uint32_t)(row_bytes / (int64_t)sizeof(U));
  dim3 grid(blocks_for((int64_t)rows * units, 4096), (unsigned)shards);
  concat_columns<U><<<grid, 256, 0, st>>>(static_cast<const U*>(src), static_cast<U*>(dst), (uint32_t)rows, units);
}

// x = D(x / (1 + exp(-x))), computed in fp32 (PyTorch's silu kernel: opmath, full-precision expf).
template <typename T>
__global__ void silu_inplace(T* __restrict__ x, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = to_f(x[i]);
    x[i] = from_f<T>(v / (1.0f + expf(-v)));
  }
}

// a = D(a b) (PyTorch's mul of two D tensors: fp32 product, one rounding).
template <typename T>
__global__ void mul_inplace(T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    a[i] = from_f<T>(to_f(a[i]) * to_f(b[i]));
}

template <typename T>
int swiglu(pkb_context* ctx, void* x1, const void* x2, int64_t n) {
  silu_inplace<T><<<blocks_for(n, 8192), 256, 0, ctx->stream>>>(static_cast<T*>(x1), n);
  PKB_LAUNCH(ctx);
  mul_inplace<T><<<blocks_for(n, 8192), 256, 0, ctx->stream>>>(static_cast<T*>(x1), static_cast<const T*>(x2), n);
  PKB_LAUNCH(ctx);
  return 0;
}

// Row-major C[m, n] = A[m, k] B[k, n] (leading dimensions lda, ldb, ldc) is the column-major product
// C^T = B^T A^T.
int gemm(pkb_context* ctx, const void* A, int64_t lda, const void* B, int64_t ldb, void* C, int64_t ldc, int64_t m,
         int64_t n, int64_t k, pkb_dtype d) {
  const float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = cuda_type(d);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B, t, (int)ldb, A,
                               t, (int)lda, &zero, C, t, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  const size_t H = (size_t)ctx->param(ctx, "H", 0), F = (size_t)ctx->param(ctx, "F", 0);
  const size_t TP = (size_t)ctx->param(ctx, "TP", 1), BF = (size_t)ctx->param(ctx, "BF", 0);
  const size_t e = pkb_dtype_size(ctx->dtype);
  if (TP == 0) PKB_FAIL_(ctx, "pkb_init", "parameter TP is missing");
  st->w_bytes = H * (F / TP) * e;
  st->act_bytes = BF * (F / TP) * e;
  for (void** p : {&st->w1, &st->w2, &st->staging, &st->w3}) PKB_CUDA(ctx, cudaMalloc(p, st->w_bytes));
  for (void** p : {&st->x1, &st->x2}) PKB_CUDA(ctx, cudaMalloc(p, st->act_bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];   // [BF, H]
  const pkb_tensor& w1 = in[1];  // [H/FS, F/TP]
  const pkb_tensor& w2 = in[2];  // [H/FS, F/TP]
  const pkb_tensor& w3 = in[3];  // [F/TP, H/FS]
  const pkb_group* tp = ctx->find_group(ctx, "tp");
  const pkb_group* fsdp = ctx->find_group(ctx, "fsdp");
  if (!tp || !fsdp) PKB_FAIL_(ctx, "pkb_run", "the spec's tp and fsdp groups are missing");
  const int FS = fsdp->size;
  const int64_t BF = x.shape[0], H = x.shape[1], Fl = w1.shape[1], Hl = w1.shape[0];
  const pkb_dtype d = x.dtype;
  const ncclDataType_t nd = pkb_nccl_dtype(d);
  const size_t e = pkb_dtype_size(d);
  if ((size_t)(H * Fl) * e > st->w_bytes || (size_t)(BF * Fl) * e > st->act_bytes || Hl * FS != H)
    PKB_FAIL_(ctx, "pkb_run", "the inputs do not match the scratch pkb_init sized from H, F, TP and BF");
  if ((uint64_t)(Fl * Hl) >= (1ull << 31))
    PKB_FAIL_(ctx, "pkb_run", "a weight shard of 2^31 or more elements is not supported");

  // 1-2. W1 = cat(all_gather(W1_shard), 0), W2 likewise, W3 = cat(all_gather(W3_shard), 1)
  const size_t shard = (size_t)(Hl * Fl);
  PKB_NCCL(ctx, ncclAllGather(w1.data, st->w1, shard, nd, fsdp->comm, ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(w2.data, st->w2, shard, nd, fsdp->comm, ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(w3.data, st->staging, shard, nd, fsdp->comm, ctx->stream));
  const int64_t row_bytes = Hl * (int64_t)e;  // one W3 shard row
  if (row_bytes % 16 == 0) launch_concat<uint4>(st->staging, st->w3, Fl, FS, row_bytes, ctx->stream);
  else if (row_bytes % 4 == 0) launch_concat<uint32_t>(st->staging, st->w3, Fl, FS, row_bytes, ctx->stream);
  else launch_concat<uint16_t>(st->staging, st->w3, Fl, FS, row_bytes, ctx->stream);
  PKB_LAUNCH(ctx);

  // 3-4. z = F.silu(x @ W1) * (x @ W2)
  if (gemm(ctx, x.data, H, st->w1, Fl, st->x1, Fl, BF, Fl, H, d)) return 1;
  if (gemm(ctx, x.data, H, st->w2, Fl, st->x2, Fl, BF, Fl, H, d)) return 1;
  int rc = 0;
  switch (d) {
    case PKB_BF16: rc = swiglu<__nv_bfloat16>(ctx, st->x1, st->x2, BF * Fl); break;
    case PKB_FP16: rc = swiglu<__half>(ctx, st->x1, st->x2, BF * Fl); break;
    case PKB_FP32: rc = swiglu<float>(ctx, st->x1, st->x2, BF * Fl); break;
    default: PKB_FAIL_(ctx, "pkb_run", "unsupported dtype");
  }
  if (rc) return rc;

  // 5-6. y = all_reduce(z @ W3) over the TP group
  if (gemm(ctx, st->x1, Fl, st->w3, H, out[0].data, H, BF, H, Fl, d)) return 1;
  if (tp->size > 1)
    PKB_NCCL(ctx, ncclAllReduce(out[0].data, out[0].data, (size_t)(BF * H), nd, ncclSum, tp->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (void* p : {st->w1, st->w2, st->staging, st->w3, st->x1, st->x2}) PKB_CUDA(ctx, cudaFree(p));
  delete st;
  ctx->user = nullptr;
  return 0;
}
