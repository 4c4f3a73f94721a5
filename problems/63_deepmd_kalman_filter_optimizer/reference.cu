// Baseline for problem 63 (one distributed step of DeePMD-kit's layer-wise Kalman filter optimizer),
// PKB's reference step by step, all in fp64:
//
//   1. v_i = H_iᵀ P_i and K_i = P_i H_i for the NB blocks: two strided-batched cuBLAS GEMVs (PKB: a
//      matmul each per block; cuBLAS's column-major view of the row-major P_i is P_iᵀ, so H_iᵀ P_i is
//      the non-transposed product and P_i H_i the transposed one);
//   2. kalman_scalars, one block: tmp = sum over i, in block order, of (lambda + v_i · H_i) (PKB's
//      running Python sum starting from 0), and lambda_next = (nu lambda + 1) - nu;
//   3. ncclAllReduce (sum) of tmp in place;
//   4. update_weights: w_i' = w_i + (A err) K_i with A = 1 / tmp, written straight into this rank's
//      slot of weights_all;
//   5. ncclAllGather in place (the send buffer is this rank's slot): every rank's NB blocks, rank-major
//      as PKB's list. PKB first exchanges the block lengths with all_gather_object (pickled lists);
//      they are the spec's static [B] * NB on every rank, so the baseline skips that exchange;
//   6. update_covariance: P_i' = (1 / lambda) (P_i - A (K_i K_iᵀ)), one fused kernel for PKB's
//      outer-product matmul (a K = 1 GEMM: one product per element) and its three elementwise ops.
//
// The elementwise steps use the _rn intrinsics so that nvcc contracts nothing into an FMA: each value
// is rounded where PyTorch's separate kernels round it (PKB's 1 / x on a tensor is a reciprocal, i.e.
// 1.0 / x). The products and subtraction of one element therefore have PKB's bits; only the dot
// products (GEMV and the v · H sum) add in another order. lambda comes from the kalman_lambda input,
// nu = 0.9987 is PKB's default kalman_nue.
#include <pkb/solution.h>

namespace {

constexpr double kNu = 0.9987;  // PKB: kalman_nue default
constexpr int kThreads = 256;

// ---- kernels ----------------------------------------------------------------------------------

/// One block. tmp[0] = sum_i (lambda + v_i · h_i) in block order; lambda_next[0] = (nu lambda + 1) - nu.
__global__ void __launch_bounds__(kThreads) kalman_scalars(const double* v, const double* h, const double* lambda,
                                                           int blocks, long long b, double* tmp, double* lambda_next) {
  __shared__ double partial[kThreads];
  const double lam = *lambda;
  double acc = 0.0;  // only thread 0's copy is used
  for (int i = 0; i < blocks; ++i) {
    double d = 0.0;
    for (long long k = threadIdx.x; k < b; k += kThreads) d += v[i * b + k] * h[i * b + k];
    partial[threadIdx.x] = d;
    __syncthreads();
    for (int off = kThreads / 2; off > 0; off /= 2) {
      if (threadIdx.x < off) partial[threadIdx.x] += partial[threadIdx.x + off];
      __syncthreads();
    }
    if (threadIdx.x == 0) acc = __dadd_rn(acc, __dadd_rn(lam, partial[0]));  // tmp + (lam + HᵀPH)
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *tmp = acc;
    *lambda_next = __dsub_rn(__dadd_rn(__dmul_rn(kNu, lam), 1.0), kNu);
  }
}

/// w_out[i] = w[i] + (A err) K[i] over the NB B weights, A = 1 / tmp (already all-reduced).
__global__ void update_weights(const double* w, const double* k, const double* tmp, const double* err, double* w_out,
                               long long n) {
  const double c = __dmul_rn(__drcp_rn(*tmp), *err);  // A * err
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    w_out[i] = __dadd_rn(w[i], __dmul_rn(c, k[i]));
}

/// Block = one row (block i, row j): P'[i, j, c] = (1 / lambda) (P[i, j, c] - A (K[i, j] K[i, c])).
__global__ void __launch_bounds__(kThreads) update_covariance(const double* p, const double* k, const double* tmp,
                                                              const double* lambda, double* p_out, long long b) {
  const long long row = blockIdx.x;         // i * b + j
  const long long block_base = row / b * b;  // i * b
  const double a = __drcp_rn(*tmp), inv_lam = __drcp_rn(*lambda), kj = k[row];
  const double* pr = p + row * b;
  double* out = p_out + row * b;
  for (long long c = threadIdx.x; c < b; c += kThreads) {
    const double outer = __dmul_rn(kj, k[block_base + c]);
    out[c] = __dmul_rn(inv_lam, __dsub_rn(pr[c], __dmul_rn(a, outer)));
  }
}

// ---- state ------------------------------------------------------------------------------------

struct Scratch {
  int blocks = 0;
  long long b = 0;
  double* v = nullptr;    // [NB, B] H_iᵀ P_i
  double* k = nullptr;    // [NB, B] K_i = P_i H_i
  double* tmp = nullptr;  // [1] the Kalman denominator, all-reduced in place
};

void free_scratch(Scratch* s) {
  for (void* p : {(void*)s->v, (void*)s->k, (void*)s->tmp})
    if (p) cudaFree(p);
  delete s;
}

int grid_for(long long n) {
  long long g = (n + kThreads - 1) / kThreads;
  return static_cast<int>(g < 1 ? 1 : (g > 4096 ? 4096 : g));
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  s->blocks = static_cast<int>(ctx->param(ctx, "NB", 8));
  s->b = ctx->param(ctx, "B", 0);
  if (s->blocks <= 0 || s->b <= 0) PKB_FAIL_(ctx, "pkb_init", "parameters NB and B are missing");
  const size_t vec = static_cast<size_t>(s->blocks) * s->b * sizeof(double);
  PKB_CUDA(ctx, cudaMalloc(&s->v, vec));
  PKB_CUDA(ctx, cudaMalloc(&s->k, vec));
  PKB_CUDA(ctx, cudaMalloc(&s->tmp, sizeof(double)));
  return 0;
}

// Inputs: H [NB, B, 1], error [], weights [NB, B, 1], P [NB, B, B], kalman_lambda [].
// Outputs: weights_all [W NB, B, 1], P_next [NB, B, B], kalman_lambda_next [].
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  const auto* h = static_cast<const double*>(in[0].data);
  const auto* err = static_cast<const double*>(in[1].data);
  const auto* w = static_cast<const double*>(in[2].data);
  const auto* p = static_cast<const double*>(in[3].data);
  const auto* lambda = static_cast<const double*>(in[4].data);
  auto* w_all = static_cast<double*>(out[0].data);
  auto* p_next = static_cast<double*>(out[1].data);
  auto* lambda_next = static_cast<double*>(out[2].data);
  const long long b = s->b, n = s->blocks * b;
  const int bi = static_cast<int>(b);
  cudaStream_t st = ctx->stream;
  const double one = 1.0, zero = 0.0;

  // 1. v_i = P_iᵀ H_i (= (H_iᵀ P_i)ᵀ) and K_i = P_i H_i.
  PKB_CUBLAS(ctx, cublasDgemvStridedBatched(ctx->cublas, CUBLAS_OP_N, bi, bi, &one, p, bi, b * b, h, 1, b, &zero, s->v,
                                            1, b, s->blocks));
  PKB_CUBLAS(ctx, cublasDgemvStridedBatched(ctx->cublas, CUBLAS_OP_T, bi, bi, &one, p, bi, b * b, h, 1, b, &zero, s->k,
                                            1, b, s->blocks));
  // 2-3. The local denominator, then its sum over the ranks; lambda_next on the side.
  kalman_scalars<<<1, kThreads, 0, st>>>(s->v, h, lambda, s->blocks, b, s->tmp, lambda_next);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(s->tmp, s->tmp, 1, ncclFloat64, ncclSum, ctx->comm, st));
  // 4-5. This rank's weights into its slot, then every rank's.
  double* mine = w_all + static_cast<long long>(ctx->rank) * n;
  update_weights<<<grid_for(n), kThreads, 0, st>>>(w, s->k, s->tmp, err, mine, n);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(mine, w_all, n, ncclFloat64, ctx->comm, st));
  // 6. The covariances.
  update_covariance<<<static_cast<unsigned>(n), kThreads, 0, st>>>(p, s->k, s->tmp, lambda, p_next, b);
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  if (ctx->user) free_scratch(static_cast<Scratch*>(ctx->user));
  ctx->user = nullptr;
  return 0;
}
