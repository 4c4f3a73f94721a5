// Not a solution: the local GEMM of problems 12, 13 and 16 alone, with no communication, timed by
// `pkb run --perf` (tools/bench_gemm_floor.sh) to give the "GEMM-only time" that overlapped
// GEMM + communication solutions are measured against. It writes every output element, but the
// values are not the problem's answer (no data from peers).
//   12: C[M, N] = A[M, K] B[K, N] with A = this rank's A_local tiled to the full K (the work every
//       rank does after its all-gather)
//   13: C[M, N] = A_local[M, K] B_local[K, N]
//   16: the [M, N] partial product A_local B_local, rows of this rank's block into the output and the
//       rest into scratch (two GEMMs, the FLOPs of one)
// PKBX_STAGES=<C> (12 and 13): the GEMM as C row chunks back to back, as the experts split it (rows
// per chunk rounded up to 64), so that the cost of chunking can be told apart from the cost of
// running beside the communication.
#include <pkb/solution.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace {

struct Scratch {
  void* a = nullptr;  // 12: [M, K]
  void* c = nullptr;  // 16: the rows that are not this rank's
};

cudaDataType_t cuda_type(pkb_dtype d) {
  return d == PKB_BF16 ? CUDA_R_16BF : d == PKB_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

/// Row-major C[m, n] = A[m, k] B[k, n].
int gemm(pkb_context* ctx, pkb_dtype d, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k) {
  const float one = 1.f, zero = 0.f;
  cudaDataType_t t = cuda_type(d);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                               static_cast<int>(k), &one, b, t, static_cast<int>(n), a, t, static_cast<int>(k), &zero, c, t,
                               static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

/// The same product as C row chunks (PKBX_STAGES, default 1), boundaries as the experts' stage_rows.
int gemm_chunked(pkb_context* ctx, pkb_dtype d, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k) {
  const char* v = std::getenv("PKBX_STAGES");
  const int64_t C = v ? std::max(1, std::min(8, std::atoi(v))) : 1;
  const size_t e = pkb_dtype_size(d);
  const int64_t per = ((m + C - 1) / C + 63) / 64 * 64;
  for (int64_t r0 = 0; r0 < m; r0 += per) {
    const int64_t rows = std::min(per, m - r0);
    if (gemm(ctx, d, static_cast<const char*>(a) + r0 * k * e, b, static_cast<char*>(c) + r0 * n * e, rows, n, k)) return 1;
  }
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  ctx->user = new Scratch{};
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  Scratch* s = static_cast<Scratch*>(ctx->user);
  const pkb_dtype d = in[0].dtype;
  const size_t e = pkb_dtype_size(d);
  const int64_t M = in[0].shape[0];
  if (std::strncmp(ctx->problem, "12_", 3) == 0) {
    const int64_t kl = in[0].shape[1], K = in[1].shape[0], N = in[1].shape[1];
    if (!s->a) {  // untimed first call: A_local repeated along K (realistic values for the GEMM)
      PKB_CUDA(ctx, cudaMalloc(&s->a, M * K * e));
      for (int64_t j = 0; j < K / kl; ++j)
        PKB_CUDA(ctx, cudaMemcpy2DAsync(static_cast<char*>(s->a) + j * kl * e, K * e, in[0].data, kl * e, kl * e, M,
                                        cudaMemcpyDeviceToDevice, ctx->stream));
    }
    return gemm_chunked(ctx, d, s->a, in[1].data, out[0].data, M, N, K);
  }
  if (std::strncmp(ctx->problem, "13_", 3) == 0)
    return gemm_chunked(ctx, d, in[0].data, in[1].data, out[0].data, M, in[1].shape[1], in[0].shape[1]);
  if (std::strncmp(ctx->problem, "16_", 3) == 0) {
    const int64_t k = in[0].shape[1], N = in[1].shape[1], mb = out[0].shape[0];
    if (!s->c) PKB_CUDA(ctx, cudaMalloc(&s->c, (M - mb) * N * e));
    const char* a = static_cast<const char*>(in[0].data);
    if (gemm(ctx, d, a + ctx->rank * mb * k * e, in[1].data, out[0].data, mb, N, k)) return 1;
    // The other row blocks, in two pieces around this rank's block, into scratch.
    const int64_t before = ctx->rank * mb, after = M - before - mb;
    if (before && gemm(ctx, d, a, in[1].data, s->c, before, N, k)) return 1;
    if (after && gemm(ctx, d, a + (before + mb) * k * e, in[1].data, static_cast<char*>(s->c) + before * N * e, after, N, k))
      return 1;
    return 0;
  }
  ctx->set_error(ctx, "gemm_only: only problems 12, 13 and 16");
  return 1;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  Scratch* s = static_cast<Scratch*>(ctx->user);
  if (s) {
    cudaFree(s->a);
    cudaFree(s->c);
    delete s;
  }
  ctx->user = nullptr;
  return 0;
}
