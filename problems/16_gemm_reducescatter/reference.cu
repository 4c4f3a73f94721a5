// Baseline for problem 16 (GEMM + reduce-scatter, Megatron-LM RowParallelLinear with sequence
// parallelism). PKB multiplies the local K-shards into a full [M, N] partial product (torch.matmul)
// and reduce-scatters it by rows (dist.reduce_scatter_tensor, sum). The same here: one cuBLAS GEMM
// into a scratch [M, N] (D in and out, fp32 accumulation, CUBLAS_COMPUTE_32F) and one
// ncclReduceScatter into the output. The scratch (M N e bytes) is allocated in pkb_init.
#include <pkb/solution.h>

#include <cstdint>

namespace {

struct State {
  void* partial = nullptr;  // [M, N]
  size_t bytes = 0;
};

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
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
  st->bytes = (size_t)ctx->param(ctx, "M", 0) * (size_t)ctx->param(ctx, "N", 0) * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&st->partial, st->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor& a = in[0];  // [M, K/W]
  const pkb_tensor& b = in[1];  // [K/W, N]
  const int64_t M = a.shape[0], Kl = a.shape[1], N = b.shape[1];
  if ((size_t)(M * N) * pkb_dtype_size(a.dtype) > st->bytes)
    PKB_FAIL_(ctx, "pkb_run", "the product is larger than the scratch pkb_init sized from M and N");
  if (gemm(ctx, a.data, b.data, st->partial, M, N, Kl, a.dtype)) return 1;
  PKB_NCCL(ctx, ncclReduceScatter(st->partial, out[0].data, (size_t)pkb_numel(&out[0]), pkb_nccl_dtype(a.dtype), ncclSum,
                                  ctx->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->partial));
  delete st;
  ctx->user = nullptr;
  return 0;
}
