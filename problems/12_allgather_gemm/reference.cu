// Baseline for problem 12 (all-gather + GEMM). PKB gathers the K-shards of A into a list
// (dist.all_gather), concatenates them along dim 1 (torch.cat) and multiplies by this rank's B
// (torch.matmul). The same steps here, as PyTorch runs them:
//   1. ncclAllGather of A_local [M, K/W] into a staging buffer [W, M, K/W] (PyTorch's list form of
//      all_gather also gathers into one flat buffer, then copies each shard out: one copy fewer here);
//   2. one concatenation kernel: A[m, r K/W + k] = staging[r, m, k];
//   3. one cuBLAS GEMM, C = A B: D in and out, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32 for fp32,
//      as PyTorch's default).
// Scratch (staging and the gathered A, M K e bytes each) is allocated in pkb_init.
#include <pkb/solution.h>

#include <cstdint>

namespace {

struct State {
  void* staging = nullptr;  // [W, M, K/W]
  void* gathered = nullptr; // [M, K]
  size_t bytes = 0;         // capacity of each
};

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// dst[m, r, k] = src[r, m, k], in copy units U (16, 4 or 2 bytes): blockIdx.y = shard r, whose source
// plane [rows, units] is contiguous; each thread copies units of it to their place in the
// concatenated row. One 32-bit division per unit keeps the kernel memory-bound.
template <typename U>
__global__ void concat_shards(const U* __restrict__ src, U* __restrict__ dst, uint32_t rows, uint32_t units) {
  const uint32_t r = blockIdx.y, shards = gridDim.y;
  const uint32_t plane = rows * units;
  const U* s = src + (size_t)r * plane;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < plane; i += gridDim.x * blockDim.x) {
    uint32_t m = i / units, k = i - m * units;
    dst[((size_t)m * shards + r) * units + k] = s[i];
  }
}

template <typename U>
void launch_concat(const void* src, void* dst, int64_t rows, int shards, int64_t row_bytes, cudaStream_t s) {
  uint32_t units = (uint32_t)(row_bytes / sizeof(U));
  uint64_t plane = (uint64_t)rows * units;
  uint64_t blocks = (plane + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  dim3 grid((unsigned)blocks, (unsigned)shards);
  concat_shards<U><<<grid, 256, 0, s>>>(static_cast<const U*>(src), static_cast<U*>(dst), (uint32_t)rows, units);
}

// Row-major C[M, N] = A[M, K] B[K, N] is the column-major product C^T = B^T A^T.
int gemm(pkb_context* ctx, const void* A, const void* B, void* C, int64_t M, int64_t N, int64_t K, pkb_dtype d) {
  const float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = cuda_type(d);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, t, (int)N, A, t,
                               (int)K, &zero, C, t, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  st->bytes = (size_t)ctx->param(ctx, "M", 0) * (size_t)ctx->param(ctx, "K", 0) * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&st->staging, st->bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->gathered, st->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor& a = in[0];  // [M, K/W]
  const pkb_tensor& b = in[1];  // [K, N]
  const int W = ctx->world;
  const int64_t M = a.shape[0], Kl = a.shape[1], K = b.shape[0], N = b.shape[1];
  const size_t e = pkb_dtype_size(a.dtype);
  if ((size_t)(M * K) * e > st->bytes)
    PKB_FAIL_(ctx, "pkb_run", "A is larger than the scratch pkb_init sized from M and K");
  if ((uint64_t)(M * Kl) >= (1ull << 31))
    PKB_FAIL_(ctx, "pkb_run", "an A shard of 2^31 or more elements is not supported");

  PKB_NCCL(ctx, ncclAllGather(a.data, st->staging, (size_t)(M * Kl), pkb_nccl_dtype(a.dtype), ctx->comm, ctx->stream));
  int64_t row_bytes = Kl * (int64_t)e;  // one shard row
  if (row_bytes % 16 == 0) launch_concat<uint4>(st->staging, st->gathered, M, W, row_bytes, ctx->stream);
  else if (row_bytes % 4 == 0) launch_concat<uint32_t>(st->staging, st->gathered, M, W, row_bytes, ctx->stream);
  else launch_concat<uint16_t>(st->staging, st->gathered, M, W, row_bytes, ctx->stream);
  PKB_LAUNCH(ctx);
  return gemm(ctx, st->gathered, b.data, out[0].data, M, N, K, a.dtype);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->staging));
  PKB_CUDA(ctx, cudaFree(st->gathered));
  delete st;
  ctx->user = nullptr;
  return 0;
}
