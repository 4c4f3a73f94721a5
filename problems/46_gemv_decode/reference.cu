// Baseline for problem 46 (vocab-parallel LM head at decode). PKB multiplies the hidden states by the
// transposed weight shard (torch.matmul(hidden_states, weight_shard.t())), adds the bias in a second
// op (so the product is rounded to D before the add), all-gathers the [T, V] slice into a list
// (dist.all_gather) and concatenates the list along dim 1 (torch.cat). Here:
//   1. one cuBLAS GEMM, D in and out, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32 for fp32, as
//      PyTorch's default), into this rank's slot of a [W, T, V] buffer;
//   2. add_bias in place: D(p + b) in fp32, as PyTorch's broadcast add (not fused into the GEMM's
//      epilogue, which would round once instead of twice);
//   3. an in-place ncclAllGather on the [W, T, V] buffer (PyTorch's list form also gathers into one
//      flat buffer and copies each slice out);
//   4. torch.cat: with T = 1 (PKB's decode shapes) [W, 1, V] already is the [1, W V] layout, so the
//      buffer is the output itself and nothing is copied; otherwise one kernel copies the slices
//      into place, logits[t, s V + v] = buffer[s, t, v].
// The staging buffer for T > 1 (T W V e bytes) is allocated in pkb_init.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace {

struct State {
  void* staging = nullptr;  // [W, T, V], used when T > 1
  size_t bytes = 0;
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

// y[t, v] = D(y[t, v] + b[v]) for y [rows, V], computed in fp32 (PyTorch's add of two D tensors).
template <typename T>
__global__ void add_bias(T* __restrict__ y, const T* __restrict__ b, int64_t rows, int64_t V) {
  const int64_t n = rows * V;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = from_f<T>(to_f(y[i]) + to_f(b[i % V]));
}

template <typename T>
void launch_add_bias(void* y, const void* b, int64_t rows, int64_t V, cudaStream_t st) {
  int64_t blocks = (rows * V + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  add_bias<T><<<(unsigned)blocks, 256, 0, st>>>(static_cast<T*>(y), static_cast<const T*>(b), rows, V);
}

// dst[t, s, j] = src[s, t, j] in copy units U (16, 4 or 2 bytes), units = one slice row: blockIdx.y is
// the slice s, whose plane [rows, units] is contiguous in src.
template <typename U>
__global__ void concat_columns(const U* __restrict__ src, U* __restrict__ dst, uint32_t rows, uint32_t units) {
  const uint32_t s = blockIdx.y, shards = gridDim.y;
  const uint32_t plane = rows * units;
  const U* from = src + (size_t)s * plane;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < plane; i += gridDim.x * blockDim.x) {
    const uint32_t t = i / units, j = i - t * units;
    dst[((size_t)t * shards + s) * units + j] = from[i];
  }
}

template <typename U>
void launch_concat(const void* src, void* dst, int64_t rows, int shards, int64_t row_bytes, cudaStream_t st) {
  const uint32_t units = (uint32_t)(row_bytes / (int64_t)sizeof(U));
  const uint64_t plane = (uint64_t)rows * units;
  uint64_t blocks = (plane + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  dim3 grid((unsigned)blocks, (unsigned)shards);
  concat_columns<U><<<grid, 256, 0, st>>>(static_cast<const U*>(src), static_cast<U*>(dst), (uint32_t)rows, units);
}

// Row-major P[T, V] = X[T, H] Wt^T with Wt row-major [V, H]: column-major P^T (V x T) = Wt (op T of the
// column-major H x V matrix Wt^T) times X^T (column-major H x T).
int gemm(pkb_context* ctx, const void* X, const void* Wt, void* P, int64_t T, int64_t V, int64_t H, pkb_dtype d) {
  const float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = cuda_type(d);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)V, (int)T, (int)H, &one, Wt, t, (int)H, X,
                               t, (int)H, &zero, P, t, (int)V, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  const int64_t T = ctx->param(ctx, "T", 1), V = ctx->param(ctx, "V", 0);
  if (T > 1) {
    st->bytes = (size_t)(T * V) * (size_t)ctx->world * pkb_dtype_size(ctx->dtype);
    PKB_CUDA(ctx, cudaMalloc(&st->staging, st->bytes));
  }
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // [T, H], the same on every rank
  const pkb_tensor& w = in[1];  // [V, H]
  const pkb_tensor& b = in[2];  // [V]
  const int W = ctx->world;
  const int64_t T = x.shape[0], H = x.shape[1], V = w.shape[0];
  const pkb_dtype d = x.dtype;
  const size_t e = pkb_dtype_size(d), slice = (size_t)(T * V);
  if (T > 1 && slice * (size_t)W * e > st->bytes)
    PKB_FAIL_(ctx, "pkb_run", "the logits are larger than the staging buffer pkb_init sized from T and V");
  if ((uint64_t)slice >= (1ull << 31))
    PKB_FAIL_(ctx, "pkb_run", "a logit slice of 2^31 or more elements is not supported");

  void* gathered = T == 1 ? out[0].data : st->staging;  // [W, T, V]
  char* own = static_cast<char*>(gathered) + (size_t)ctx->rank * slice * e;
  if (gemm(ctx, x.data, w.data, own, T, V, H, d)) return 1;
  switch (d) {
    case PKB_BF16: launch_add_bias<__nv_bfloat16>(own, b.data, T, V, ctx->stream); break;
    case PKB_FP16: launch_add_bias<__half>(own, b.data, T, V, ctx->stream); break;
    default: launch_add_bias<float>(own, b.data, T, V, ctx->stream); break;
  }
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(own, gathered, slice, pkb_nccl_dtype(d), ctx->comm, ctx->stream));
  if (T == 1) return 0;
  const int64_t row_bytes = V * (int64_t)e;  // one slice row
  if (row_bytes % 16 == 0) launch_concat<uint4>(st->staging, out[0].data, T, W, row_bytes, ctx->stream);
  else if (row_bytes % 4 == 0) launch_concat<uint32_t>(st->staging, out[0].data, T, W, row_bytes, ctx->stream);
  else launch_concat<uint16_t>(st->staging, out[0].data, T, W, row_bytes, ctx->stream);
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  if (st->staging) PKB_CUDA(ctx, cudaFree(st->staging));
  delete st;
  ctx->user = nullptr;
  return 0;
}
