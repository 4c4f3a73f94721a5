// Baseline for problem 43 (Adam on the local shard, then an all-gather of the updated shards). PKB
// clones m, v and w, then runs PyTorch ops on D tensors, each one computed in fp32 and rounded to D:
//   m = m * b1;  m = m + (1 - b1) g            (mul_, add_ with alpha: one fma)
//   v = v * b2;  v = v + (1 - b2) (g g)        (mul_, addcmul_)
//   m_hat = m * fp32(1 / bc1);  v_hat = v * fp32(1 / bc2)   (division by a Python float is a product
//                                                             with the fp32 reciprocal)
//   d = sqrt(v_hat);  d = d + eps;  r = m_hat / d;  u = r * (-lr);  w = w + u
// with bc1 = 1 - b1^step and bc2 = 1 - b2^step in double (math.pow), then dist.all_gather_into_tensor
// of w. Here:
//   1. adam_shard: one kernel for that whole chain, with the same eleven roundings to D, writing the
//      updated shard straight into this rank's slot of the output (PyTorch runs 3 clones and 12
//      elementwise kernels); the bias corrections are computed on the device from the step tensor;
//   2. ncclAllGather in place (NCCL's in-place form: the send buffer is the rank's slot of the output).
// lr = 1e-3, beta1 = 0.9, beta2 = 0.999 and eps = 1e-8 are PKB's float arguments, fixed here.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999;  // PKB: lr, beta1, beta2
constexpr float kEps = 1e-8f;                               // PKB: eps
constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

/// An fp32 result stored in a D tensor and read back (PyTorch's rounding after every op).
template <typename T> __device__ __forceinline__ float round_d(float v) { return to_f<T>(from_f<T>(v)); }

/// w_out[i] = the Adam-updated w[i] (PKB's op order and roundings; see the file comment).
template <typename T>
__global__ void adam_shard(const T* __restrict__ g_in, const T* __restrict__ w_in, const T* __restrict__ m_in,
                           const T* __restrict__ v_in, const int64_t* __restrict__ step, T* __restrict__ w_out,
                           int64_t n) {
  // Python's math.pow in double; PyTorch then converts the Python float to fp32 before 1 / x.
  const double s = (double)*step;
  const float inv_bc1 = 1.0f / (float)(1.0 - pow(kBeta1, s));
  const float inv_bc2 = 1.0f / (float)(1.0 - pow(kBeta2, s));
  const float b1 = (float)kBeta1, b2 = (float)kBeta2;
  const float a1 = (float)(1.0 - kBeta1), a2 = (float)(1.0 - kBeta2), neg_lr = (float)(-kLr);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float g = to_f(g_in[i]);
    float m = round_d<T>(__fmul_rn(to_f(m_in[i]), b1));
    m = round_d<T>(__fmaf_rn(a1, g, m));
    float v = round_d<T>(__fmul_rn(to_f(v_in[i]), b2));
    v = round_d<T>(__fmaf_rn(a2, __fmul_rn(g, g), v));
    const float m_hat = round_d<T>(__fmul_rn(m, inv_bc1));
    const float v_hat = round_d<T>(__fmul_rn(v, inv_bc2));
    float d = round_d<T>(__fsqrt_rn(v_hat));
    d = round_d<T>(__fadd_rn(d, kEps));
    const float r = round_d<T>(__fdiv_rn(m_hat, d));
    const float u = round_d<T>(__fmul_rn(r, neg_lr));
    w_out[i] = from_f<T>(__fadd_rn(to_f(w_in[i]), u));
  }
}

template <typename T>
int run(pkb_context* ctx, const pkb_tensor* in, pkb_tensor& out) {
  const pkb_tensor &g = in[0], &w = in[1], &m = in[2], &v = in[3], &step = in[4];
  const int64_t P = pkb_numel(&g);
  if (pkb_numel(&out) != P * ctx->world) PKB_FAIL_(ctx, "pkb_run", "gathered must hold W x P elements");
  T* slot = static_cast<T*>(out.data) + (int64_t)ctx->rank * P;
  int64_t blocks = (P + kThreads - 1) / kThreads;
  if (blocks > 8192) blocks = 8192;
  if (blocks < 1) blocks = 1;
  adam_shard<T><<<(unsigned)blocks, kThreads, 0, ctx->stream>>>(
      static_cast<const T*>(g.data), static_cast<const T*>(w.data), static_cast<const T*>(m.data),
      static_cast<const T*>(v.data), static_cast<const int64_t*>(step.data), slot, P);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(slot, out.data, (size_t)P, pkb_nccl_dtype(out.dtype), ctx->comm, ctx->stream));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in: grad_shard, master_shard, exp_avg, exp_avg_sq (D [P]), step (int64 [1]); out[0] = gathered D [W P].
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, in, out[0]);
    case PKB_FP16: return run<__half>(ctx, in, out[0]);
    case PKB_FP32: return run<float>(ctx, in, out[0]);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
