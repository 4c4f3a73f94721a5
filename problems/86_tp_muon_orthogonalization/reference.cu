// Baseline for problem 86 (Muon's Newton-Schulz orthogonalization with column-sharded X). PKB's steps,
// and here (X is this rank's R x Cl block, Cl = C / W, all fp32 inside):
//   1. X = float(x); ss = (X * X).sum() (squares rounded to fp32, then summed): one kernel converts and
//      writes per-block partial sums, a second adds them; ncclAllReduce (sum) of that one fp32;
//   2. X = X / max(sqrt(ss), 1e-7) (PKB's clamp_min(eps), a true division by the device scalar);
//   3. steps times, with the step's quintic (a, b, c):
//      a. G = X X^T (x @ x.mT): one cuBLAS GEMM, R x R over K = Cl; ncclAllReduce (sum) of G;
//      b. U = b G + c G G (torch.addmm(gram, gram, gram, alpha = c, beta = b): PyTorch copies gram into
//         the result, then one GEMM with beta = b), the same copy and GEMM here;
//      c. X' = a X + U X (torch.addmm(x, update, x, alpha = 1, beta = a)): copy, GEMM; X and X' swap;
//   4. out = bf16(X).
// Every GEMM is true FP32, as PyTorch's default (allow_tf32 = False) runs it: cublasGemmEx with fp32
// operands and CUBLAS_COMPUTE_32F on a handle in CUBLAS_DEFAULT_MATH (set in pkb_init, the handle's
// previous mode restored in pkb_finalize), which never uses TF32 tensor cores. G G is computed
// redundantly on every rank, as in PKB.
//
// Row-major matrices are column-major transposes, so with row-major buffers: G = X X^T is the
// column-major (X^T)^T (X^T) (OP_T, OP_N over the buffer of X, ld Cl); row-major P = A B is the
// column-major B^T A^T, i.e. cuBLAS's C = A' B' with A' = B's buffer and B' = A's buffer (OP_N, OP_N).
#include <pkb/solution.h>

#include <cuda_bf16.h>

#include <cstdint>

namespace {

// PKB's "quintic" coefficients (a, b, c), used in turn: step s takes set s mod 5.
constexpr double kQuintic[5][3] = {{4.0848, -6.8946, 2.9270},
                                   {3.9505, -6.3029, 2.6377},
                                   {3.7418, -5.5913, 2.3037},
                                   {2.8769, -3.1427, 1.2046},
                                   {2.8366, -3.0525, 1.2012}};
constexpr float kNormEps = 1e-7f;  // PKB: _distributed_normalize's eps
constexpr int kThreads = 256;
constexpr int kNormBlocks = 256;   // partial sums of squares

// Sum over the block (kThreads threads); thread 0 gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w];
  return s;
}

/// X[i] = float(x[i]); partial[block] = the sum of X[i]^2 over the block's grid-stride share.
__global__ void __launch_bounds__(kThreads) upcast_sum_squares(const __nv_bfloat16* __restrict__ x, float* __restrict__ X,
                                                               int64_t n, float* __restrict__ partial) {
  float s = 0.0f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    X[i] = v;
    s = __fadd_rn(s, __fmul_rn(v, v));  // x * x is its own fp32 tensor in PKB: no fma
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/// *out = the sum of partial[0 .. n) (one block).
__global__ void __launch_bounds__(kThreads) finish_sum(const float* __restrict__ partial, int n, float* out) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

/// X[i] /= max(sqrt(*ss), eps).
__global__ void normalize(float* __restrict__ X, int64_t n, const float* __restrict__ ss) {
  const float norm = fmaxf(__fsqrt_rn(*ss), kNormEps);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    X[i] = __fdiv_rn(X[i], norm);
}

/// out[i] = bf16(X[i]) (PKB's x_work.to(in_dtype)).
__global__ void to_bf16(const float* __restrict__ X, __nv_bfloat16* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16_rn(X[i]);
}

struct State {
  int64_t R = 0, Cl = 0;
  float* X[2] = {nullptr, nullptr};  // [R, Cl] each, ping-pong
  float* G = nullptr;                // [R, R] Gram matrix
  float* U = nullptr;                // [R, R] update b G + c G G
  float* partial = nullptr;          // [kNormBlocks]
  float* ss = nullptr;               // the squared norm
  cublasMath_t saved_math = CUBLAS_DEFAULT_MATH;
};

/// Column-major C[m x n] = alpha op(A) op(B) + beta C, all fp32, FP32 compute.
int sgemm(pkb_context* ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, ta, tb, (int)m, (int)n, (int)k, &alpha, A, CUDA_R_32F, (int)lda, B, CUDA_R_32F,
                               (int)ldb, &beta, C, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

unsigned elementwise_blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/// One Newton-Schulz step on st.X[cur] into st.X[1 - cur].
int newton_schulz_step(pkb_context* ctx, State& st, int cur, const double* coef) {
  const int64_t R = st.R, Cl = st.Cl;
  const float a = (float)coef[0], b = (float)coef[1], c = (float)coef[2];
  const float* X = st.X[cur];
  float* Xn = st.X[1 - cur];
  cudaStream_t s = ctx->stream;
  // a. G = X X^T, summed over the ranks.
  if (sgemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, R, R, Cl, 1.0f, X, Cl, X, Cl, 0.0f, st.G, R)) return 1;
  PKB_NCCL(ctx, ncclAllReduce(st.G, st.G, (size_t)(R * R), ncclFloat32, ncclSum, ctx->comm, s));
  // b. U = b G + c G G.
  PKB_CUDA(ctx, cudaMemcpyAsync(st.U, st.G, (size_t)(R * R) * sizeof(float), cudaMemcpyDeviceToDevice, s));
  if (sgemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, R, R, R, c, st.G, R, st.G, R, b, st.U, R)) return 1;
  // c. X' = a X + U X.
  PKB_CUDA(ctx, cudaMemcpyAsync(Xn, X, (size_t)(R * Cl) * sizeof(float), cudaMemcpyDeviceToDevice, s));
  return sgemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, Cl, R, R, 1.0f, X, Cl, st.U, R, a, Xn, Cl);
}

int run(pkb_context* ctx, State& st, const pkb_tensor& x, pkb_tensor& out) {
  const int64_t n = st.R * st.Cl;
  if (x.ndim != 2 || x.shape[0] != st.R || x.shape[1] != st.Cl)
    PKB_FAIL_(ctx, "pkb_run", "x is not the R x C/W that pkb_init sized for");
  if (x.dtype != PKB_BF16 || out.dtype != PKB_BF16) PKB_FAIL_(ctx, "pkb_run", "x and out must be bf16");
  const int steps = (int)ctx->param(ctx, "steps", 5);
  cudaStream_t s = ctx->stream;
  const unsigned eb = elementwise_blocks(n);
  // 1-2. Upcast and normalize by the global Frobenius norm.
  upcast_sum_squares<<<kNormBlocks, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x.data), st.X[0], n, st.partial);
  PKB_LAUNCH(ctx);
  finish_sum<<<1, kThreads, 0, s>>>(st.partial, kNormBlocks, st.ss);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(st.ss, st.ss, 1, ncclFloat32, ncclSum, ctx->comm, s));
  normalize<<<eb, kThreads, 0, s>>>(st.X[0], n, st.ss);
  PKB_LAUNCH(ctx);
  // 3. The Newton-Schulz steps.
  int cur = 0;
  for (int step = 0; step < steps; ++step) {
    if (newton_schulz_step(ctx, st, cur, kQuintic[step % 5])) return 1;
    cur = 1 - cur;
  }
  // 4. Back to bf16.
  to_bf16<<<eb, kThreads, 0, s>>>(st.X[cur], static_cast<__nv_bfloat16*>(out.data), n);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  st->R = ctx->param(ctx, "R", 0);
  st->Cl = ctx->param(ctx, "C", 0) / ctx->world;
  if (st->R <= 0 || st->Cl <= 0) PKB_FAIL_(ctx, "pkb_init", "R and C / W must be positive");
  const size_t xb = (size_t)(st->R * st->Cl) * sizeof(float), gb = (size_t)(st->R * st->R) * sizeof(float);
  PKB_CUDA(ctx, cudaMalloc(&st->X[0], xb));
  PKB_CUDA(ctx, cudaMalloc(&st->X[1], xb));
  PKB_CUDA(ctx, cudaMalloc(&st->G, gb));
  PKB_CUDA(ctx, cudaMalloc(&st->U, gb));
  PKB_CUDA(ctx, cudaMalloc(&st->partial, kNormBlocks * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->ss, sizeof(float)));
  // True FP32 GEMMs: no TF32 (CUBLAS_TF32_TENSOR_OP_MATH would allow it with CUBLAS_COMPUTE_32F).
  PKB_CUBLAS(ctx, cublasGetMathMode(ctx->cublas, &st->saved_math));
  PKB_CUBLAS(ctx, cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in[0] = x bf16 [R, C/W]; out[0] = bf16 [R, C/W].
  return run(ctx, *static_cast<State*>(ctx->user), in[0], out[0]);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUBLAS(ctx, cublasSetMathMode(ctx->cublas, st->saved_math));
  PKB_CUDA(ctx, cudaFree(st->X[0]));
  PKB_CUDA(ctx, cudaFree(st->X[1]));
  PKB_CUDA(ctx, cudaFree(st->G));
  PKB_CUDA(ctx, cudaFree(st->U));
  PKB_CUDA(ctx, cudaFree(st->partial));
  PKB_CUDA(ctx, cudaFree(st->ss));
  delete st;
  ctx->user = nullptr;
  return 0;
}
