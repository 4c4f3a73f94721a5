// Baseline for problem 41 (one ZeRO-1 training step of a ReLU MLP with an MSE loss and Adam). PKB
// flattens the parameters and broadcasts them from rank 0, runs the forward (F.linear, relu, F.linear,
// mse_loss) and autograd's backward on the local batch, all-reduces the flat gradient (sum), divides
// it by W, runs Adam op by op on this rank's slice [rank P/W, (rank+1) P/W) with its own state slices,
// and all-gathers the updated slices into the flat parameters. The same steps here, in the same
// arithmetic (D tensors, fp32 GEMM accumulation and fp32 elementwise math, every op's result stored in D):
//   1. pack W1 b1 W2 b2 into a flat buffer on rank 0 (_flatten_dense_tensors);
//   2. ncclBroadcast from rank 0, in place;
//   3. forward: h = relu(X W1^T + b1), out = h W2^T + b2: the bias is written into the output and
//      the GEMM adds to it (beta = 1: one rounding of the fp32 sum, as PyTorch's addmm), relu kernel;
//   4. mse_loss_backward: dout = alpha (out - y) in D arithmetic (PyTorch computes it on D scalars:
//      out - y is rounded to D, alpha = 2 / numel is rounded to D, the product is rounded to D;
//      the trailing * grad_output multiplies by 1);
//   5. backward GEMMs into the flat gradient: dW2 = dout^T h, db2 = ones^T dout (a GEMV:
//      PyTorch's sum over the rows, fp32 sums and one rounding), gh = dout W2, gh = 0 where h <= 0
//      (threshold_backward on relu's result), db1 = ones^T gh, dW1 = gh^T X;
//   6. ncclAllReduce (sum, D) in place on the flat gradient;
//   7. one Adam kernel over the P/W own elements: g = D(g * (1/W)), then problem 43's chain of eleven
//      ops, each rounded to D, writing the updated slice in place into the flat parameters and both
//      states straight into their outputs (PyTorch clones the slices and runs about a dozen kernels);
//   8. ncclAllGather in place on the flat parameters (this rank's slice is its send buffer), then
//      four copies into the parameter outputs (PyTorch copies the gathered tensor into flat_p and
//      returns views of it).
// lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8 are PKB's float arguments, fixed here; the step is
// the spec's integer parameter `step`.
#include <pkb/solution.h>

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999;  // PKB: lr, beta1, beta2
constexpr float kEps = 1e-8f;                               // PKB: eps
constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
/// An fp32 result stored in a D tensor and read back (PyTorch's rounding after every op).
template <typename T> __device__ __forceinline__ float round_d(float v) { return to_f<T>(from_f<T>(v)); }

unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

// ---- kernels -------------------------------------------------------------------------------------

/// out[r, c] = bias[c]: the addend of the bias GEMM (beta = 1).
template <typename T>
__global__ void fill_rows(T* __restrict__ out, const T* __restrict__ bias, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = bias[i % cols];
}

template <typename T>
__global__ void relu_inplace(T* __restrict__ x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    if (!(to_f(x[i]) > 0.0f)) x[i] = from_f<T>(0.0f);
}

/// o = D(alpha * D(o - y)): mse_loss_backward on D scalars, in place on the forward output.
template <typename T>
__global__ void mse_grad(T* __restrict__ o, const T* __restrict__ y, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float diff = round_d<T>(__fsub_rn(to_f(o[i]), to_f(y[i])));
    o[i] = from_f<T>(__fmul_rn(alpha, diff));
  }
}

/// g = 0 where relu's result h is <= 0 (threshold_backward).
template <typename T>
__global__ void relu_mask(T* __restrict__ g, const T* __restrict__ h, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    if (!(to_f(h[i]) > 0.0f)) g[i] = from_f<T>(0.0f);
}

/// x[i] = v: the ones vector the bias-gradient GEMVs sum with.
template <typename T>
__global__ void fill_value(T* __restrict__ x, int64_t n, float v) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    x[i] = from_f<T>(v);
}

struct AdamScalars {
  float inv_w, inv_bc1, inv_bc2;
};

/// Adam on n elements: the parameters w (updated in place), the summed gradient gsum and the states
/// m, v (PKB's op order; see the file comment), writing the states into m_out, v_out.
template <typename T>
__global__ void adam_slice(T* __restrict__ w, const T* __restrict__ gsum, const T* __restrict__ m_in,
                           const T* __restrict__ v_in, int64_t n, AdamScalars s, T* __restrict__ m_out,
                           T* __restrict__ v_out) {
  const float b1 = (float)kBeta1, b2 = (float)kBeta2;
  const float a1 = (float)(1.0 - kBeta1), a2 = (float)(1.0 - kBeta2), neg_lr = (float)(-kLr);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float g = round_d<T>(__fmul_rn(to_f(gsum[i]), s.inv_w));  // div_(W)
    float m = round_d<T>(__fmul_rn(to_f(m_in[i]), b1));
    m = round_d<T>(__fmaf_rn(a1, g, m));
    float v = round_d<T>(__fmul_rn(to_f(v_in[i]), b2));
    v = round_d<T>(__fmaf_rn(a2, __fmul_rn(g, g), v));
    const float m_hat = round_d<T>(__fmul_rn(m, s.inv_bc1));
    const float v_hat = round_d<T>(__fmul_rn(v, s.inv_bc2));
    float d = round_d<T>(__fsqrt_rn(v_hat));
    d = round_d<T>(__fadd_rn(d, kEps));
    const float r = round_d<T>(__fdiv_rn(m_hat, d));
    const float u = round_d<T>(__fmul_rn(r, neg_lr));
    w[i] = from_f<T>(__fadd_rn(to_f(w[i]), u));
    m_out[i] = from_f<T>(m);
    v_out[i] = from_f<T>(v);
  }
}

// ---- launchers -----------------------------------------------------------------------------------

cudaDataType_t cuda_type(pkb_dtype d) { return d == PKB_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/// Row-major C[M, N] = op(A) op(B) + beta C, with op(X) = X^T where the flag says so (A is stored
/// [K, M] then, B [N, K]); fp32 accumulation, no TF32 (PyTorch's defaults). Column-major cuBLAS sees
/// the transposes: C^T = op(B)^T op(A)^T.
int gemm(pkb_context* ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, const void* B, void* C,
         float beta) {
  const float one = 1.0f;
  const cudaDataType_t t = cuda_type(ctx->dtype);
  const int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                               (int)M, (int)K, &one, B, t, ldb, A, t, lda, &beta, C, t, (int)N, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  return 0;
}

struct State {
  cublasMath_t saved_math = CUBLAS_DEFAULT_MATH;  // the handle's mode before pkb_init (restored)
  int64_t rows = 0, din = 0, hid = 0, dout = 0, P = 0;
  int64_t off[5] = {};        // flat offsets of W1, b1, W2, b2
  void* flat_p = nullptr;     // [P] parameters (broadcast)
  void* flat_g = nullptr;     // [P] gradient (all-reduced)
  void* h = nullptr;          // [rows, hid] relu output
  void* out = nullptr;        // [rows, dout] forward output, then its gradient
  void* gh = nullptr;         // [rows, hid] gradient of h, then of the pre-activation
  void* ones = nullptr;       // [rows] of 1: the bias gradients are ones^T G (fp32 sums, one rounding)
};

template <typename T>
int run(pkb_context* ctx, const State& st, const pkb_tensor* in, pkb_tensor* outs) {
  const size_t e = sizeof(T);
  const ncclDataType_t nt = pkb_nccl_dtype(ctx->dtype);
  const int64_t R = st.rows, DI = st.din, H = st.hid, DO = st.dout, P = st.P;
  if (in[0].shape[0] != R || in[0].shape[1] != DI || in[2].shape[0] != H || in[4].shape[0] != DO)
    PKB_FAIL_(ctx, "pkb_run", "input shapes differ from those pkb_init sized the scratch for");
  T* p = static_cast<T*>(st.flat_p);
  T* g = static_cast<T*>(st.flat_g);
  // 1-2. flatten on the root, broadcast.
  if (ctx->rank == 0)
    for (int t = 0; t < 4; ++t) {
      const size_t bytes = (size_t)(st.off[t + 1] - st.off[t]) * e;
      PKB_CUDA(ctx, cudaMemcpyAsync(p + st.off[t], in[2 + t].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    }
  PKB_NCCL(ctx, ncclBroadcast(p, p, (size_t)P, nt, 0, ctx->comm, ctx->stream));
  const T *W1 = p + st.off[0], *b1 = p + st.off[1], *W2 = p + st.off[2], *b2 = p + st.off[3];
  T *gW1 = g + st.off[0], *gb1 = g + st.off[1], *gW2 = g + st.off[2], *gb2 = g + st.off[3];
  const T* X = static_cast<const T*>(in[0].data);
  const T* y = static_cast<const T*>(in[1].data);
  T* h = static_cast<T*>(st.h);
  T* o = static_cast<T*>(st.out);
  T* gh = static_cast<T*>(st.gh);
  cudaStream_t s = ctx->stream;
  // 3. forward.
  fill_rows<T><<<blocks_for(R * H), kThreads, 0, s>>>(h, b1, R, H);
  PKB_LAUNCH(ctx);
  if (gemm(ctx, false, true, R, H, DI, X, W1, h, 1.0f)) return 1;  // X W1^T + b1
  relu_inplace<T><<<blocks_for(R * H), kThreads, 0, s>>>(h, R * H);
  PKB_LAUNCH(ctx);
  fill_rows<T><<<blocks_for(R * DO), kThreads, 0, s>>>(o, b2, R, DO);
  PKB_LAUNCH(ctx);
  if (gemm(ctx, false, true, R, DO, H, h, W2, o, 1.0f)) return 1;  // h W2^T + b2
  // 4. loss gradient; alpha = 2 / numel as a D scalar.
  const float alpha = (float)(T)(float)(2.0 / (double)(R * DO));
  mse_grad<T><<<blocks_for(R * DO), kThreads, 0, s>>>(o, y, R * DO, alpha);
  PKB_LAUNCH(ctx);
  // 5. backward.
  if (gemm(ctx, true, false, DO, H, R, o, h, gW2, 0.0f)) return 1;  // dout^T h
  if (gemm(ctx, false, false, 1, DO, R, st.ones, o, gb2, 0.0f)) return 1;  // column sums: ones^T dout
  if (gemm(ctx, false, false, R, H, DO, o, W2, gh, 0.0f)) return 1;  // dout W2
  relu_mask<T><<<blocks_for(R * H), kThreads, 0, s>>>(gh, h, R * H);
  PKB_LAUNCH(ctx);
  if (gemm(ctx, false, false, 1, H, R, st.ones, gh, gb1, 0.0f)) return 1;  // column sums: ones^T gh
  if (gemm(ctx, true, false, H, DI, R, gh, X, gW1, 0.0f)) return 1;  // gh^T X
  // 6. the gradient collective; this rank's slice of the summed gradient is g + start.
  const int64_t part = P / ctx->world, start = (int64_t)ctx->rank * part;
  PKB_NCCL(ctx, ncclAllReduce(g, g, (size_t)P, nt, ncclSum, ctx->comm, s));
  // 7. Adam on the own slice. The bias corrections: Python's math.pow in double, then the fp32
  //    reciprocal PyTorch's division by a Python float multiplies by.
  const double step = (double)ctx->param(ctx, "step", 1);
  AdamScalars sc{1.0f / (float)ctx->world, 1.0f / (float)(1.0 - std::pow(kBeta1, step)),
                 1.0f / (float)(1.0 - std::pow(kBeta2, step))};
  adam_slice<T><<<blocks_for(part), kThreads, 0, s>>>(p + start, g + start, static_cast<const T*>(in[6].data),
                                                      static_cast<const T*>(in[7].data), part, sc,
                                                      static_cast<T*>(outs[4].data), static_cast<T*>(outs[5].data));
  PKB_LAUNCH(ctx);
  // 8. gather the updated slices, unflatten into the outputs.
  PKB_NCCL(ctx, ncclAllGather(p + start, p, (size_t)part, nt, ctx->comm, s));
  for (int t = 0; t < 4; ++t)
    PKB_CUDA(ctx, cudaMemcpyAsync(outs[t].data, p + st.off[t], (size_t)(st.off[t + 1] - st.off[t]) * e,
                                  cudaMemcpyDeviceToDevice, s));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  // GEMMs accumulate and reduce in fp32: no TF32 and no split-K reduction in bf16 (cuBLAS's
  // default for a bf16 output may round split-K partial sums to bf16; PyTorch allows that too,
  // allow_bf16_reduced_precision_reduction). The spec's grid inputs are exact in fp32 sums only.
  PKB_CUBLAS(ctx, cublasGetMathMode(ctx->cublas, &st->saved_math));
  PKB_CUBLAS(ctx, cublasSetMathMode(ctx->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  st->rows = ctx->param(ctx, "B", 0) / ctx->world;
  st->din = ctx->param(ctx, "DIN", 0);
  st->hid = ctx->param(ctx, "HID", 0);
  st->dout = ctx->param(ctx, "DOUT", 0);
  const int64_t n[4] = {st->hid * st->din, st->hid, st->dout * st->hid, st->dout};
  for (int t = 0; t < 4; ++t) st->off[t + 1] = st->off[t] + n[t];
  st->P = st->off[4];
  const size_t e = pkb_dtype_size(ctx->dtype);
  if (st->P % ctx->world != 0) PKB_FAIL_(ctx, "pkb_init", "P must divide by the world size");
  for (void** b : {&st->flat_p, &st->flat_g})
    PKB_CUDA(ctx, cudaMalloc(b, (size_t)st->P * e));
  PKB_CUDA(ctx, cudaMalloc(&st->h, (size_t)(st->rows * st->hid) * e));
  PKB_CUDA(ctx, cudaMalloc(&st->gh, (size_t)(st->rows * st->hid) * e));
  PKB_CUDA(ctx, cudaMalloc(&st->out, (size_t)(st->rows * st->dout) * e));
  PKB_CUDA(ctx, cudaMalloc(&st->ones, (size_t)st->rows * e));
  if (ctx->dtype == PKB_BF16)
    fill_value<__nv_bfloat16><<<blocks_for(st->rows), kThreads, 0, ctx->stream>>>(
        static_cast<__nv_bfloat16*>(st->ones), st->rows, 1.0f);
  else
    fill_value<float><<<blocks_for(st->rows), kThreads, 0, ctx->stream>>>(static_cast<float*>(st->ones), st->rows, 1.0f);
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int n_in, pkb_tensor* out, int n_out) {
  // in: X_local, y_local, W1, b1, W2, b2, exp_avg_part, exp_avg_sq_part;
  // out: W1, b1, W2, b2 (gathered), exp_avg_part, exp_avg_sq_part (updated).
  if (n_in != 8 || n_out != 6) PKB_FAIL_(ctx, "pkb_run", "expected 8 inputs and 6 outputs");
  const State& st = *static_cast<State*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, st, in, out);
    case PKB_FP32: return run<float>(ctx, st, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (void* b : {st->flat_p, st->flat_g, st->h, st->gh, st->out, st->ones}) PKB_CUDA(ctx, cudaFree(b));
  PKB_CUBLAS(ctx, cublasSetMathMode(ctx->cublas, st->saved_math));
  delete st;
  ctx->user = nullptr;
  return 0;
}
