// Baseline for problem 13 (GEMM + all-reduce, Megatron-LM RowParallelLinear). PKB multiplies the local
// shards (torch.matmul), clones the product and all-reduces the clone in place (dist.all_reduce, sum).
// Here: one cuBLAS GEMM straight into the output (D in and out, fp32 accumulation, CUBLAS_COMPUTE_32F)
// and one in-place ncclAllReduce on it: PyTorch's work without the clone's copy.
#include <pkb/solution.h>

#include <cstdint>

namespace {

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

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  const pkb_tensor& a = in[0];  // [M, K]
  const pkb_tensor& b = in[1];  // [K, N]
  const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
  if (gemm(ctx, a.data, b.data, out[0].data, M, N, K, a.dtype)) return 1;
  PKB_NCCL(ctx, ncclAllReduce(out[0].data, out[0].data, (size_t)(M * N), pkb_nccl_dtype(a.dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
