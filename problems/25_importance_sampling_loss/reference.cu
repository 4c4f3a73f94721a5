// Baseline for problem 25 (importance-sampling policy-gradient loss), PKB's reference step by step,
// all on ctx->stream:
//
//   1. cuBLAS GEMM      logits = D(h W^T) [M, V]                               (F.linear)
//   2. label_logprob    per row (one block): max, fp32 sum of exp(x - max), then at the label
//                       lp = D((x - max) - log(sum)) (F.cross_entropy = log_softmax then nll_loss:
//                       PyTorch writes the whole [M, V] log-softmax; only the label's entry is
//                       used, so only it is computed, with the same fp32 arithmetic). An ignored
//                       label (-100) gives ce = 0, as nll_loss does.
//   3. token_terms      one block over the tokens: delta, ratio, the two per-token outputs, and the
//                       fp32 sums (each rounded to D, as torch's sum of a D tensor), min and max
//   4. ncclAllReduce x7 in PKB's order: count (fp32), pg, ratio, min (MIN), max (MAX), k3, entropy
//   5. finish           the fp32 loss and metrics (PyTorch promotes a 0-d D tensor divided by the
//                       0-d fp32 count to fp32; torch.stack then promotes the D min and max)
//
// PKB's `if n_valid_local > 0` reads the count on the host; its else branch (+-inf) is what the
// masked min / max give on the device anyway, so the baseline does not synchronize.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

namespace {

constexpr float kClamp = 20.0f;  // PKB: delta.clamp(min=-20.0, max=20.0)
constexpr int kRowThreads = 512;
constexpr int kTokenThreads = 1024;

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T> __device__ __forceinline__ float round_t(float v) { return to_f(from_f<T>(v)); }

/// Block-wide reduction of one float with `op` (every thread gets the result).
template <int kThreads, typename Op>
__device__ float block_reduce(float v, float* red, Op op) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] = op(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  float r = red[0];
  __syncthreads();
  return r;
}

/// 2. lp[row] = D(log_softmax(logits[row])[label]); 0 where the label is ignored.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) label_logprob(const T* logits, const long long* labels, int vocab,
                                                             long long ignore_index, T* lp) {
  __shared__ float red[kRowThreads];
  const T* x = logits + (long long)blockIdx.x * vocab;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < vocab; v += kRowThreads) m = fmaxf(m, to_f(x[v]));
  m = block_reduce<kRowThreads>(m, red, [](float a, float b) { return fmaxf(a, b); });
  float s = 0.0f;
  for (int v = threadIdx.x; v < vocab; v += kRowThreads) s += expf(to_f(x[v]) - m);
  s = block_reduce<kRowThreads>(s, red, [](float a, float b) { return a + b; });
  if (threadIdx.x == 0) {
    long long label = labels[blockIdx.x];
    float value = 0.0f;
    if (label != ignore_index) value = __fsub_rn(__fsub_rn(to_f(x[label]), m), logf(s));
    lp[blockIdx.x] = from_f<T>(value);
  }
}

/// Indices into the D scalars that step 3 writes and step 4 all-reduces.
enum Scalar { kPg, kRatio, kMin, kMax, kK3, kEntropy, kSurrogate, kScalars };

/// 3. Per token (PKB's masked ops, each rounded to D), then the block's sums, min and max.
template <typename T>
__global__ void __launch_bounds__(kTokenThreads) token_terms(const T* lp, const long long* labels, const T* old_lp,
                                                             const T* adv, int tokens, long long ignore_index,
                                                             T* out_logprobs, T* out_loss, T* scalars, float* count) {
  __shared__ float red[kTokenThreads];
  float pg = 0.0f, ratio_sum = 0.0f, k3 = 0.0f, ent = 0.0f, sur = 0.0f, mn = INFINITY, mx = -INFINITY, n = 0.0f;
  for (int t = threadIdx.x; t < tokens; t += kTokenThreads) {
    const bool valid = labels[t] != ignore_index;
    const float new_lp = to_f(lp[t]);  // -ce; ce = 0 where ignored
    const float ce = -new_lp;
    float delta = valid ? round_t<T>(new_lp - to_f(old_lp[t])) : 0.0f;
    delta = fminf(fmaxf(delta, -kClamp), kClamp);
    const float ratio = round_t<T>(expf(delta));
    const float w = valid ? round_t<T>(ratio * to_f(adv[t])) : 0.0f;  // ratio * adv, masked
    out_logprobs[t] = from_f<T>(new_lp);
    out_loss[t] = from_f<T>(-w);
    pg += -w;
    sur += round_t<T>(w * ce);
    if (valid) {
      ratio_sum += ratio;
      mn = fminf(mn, ratio);
      mx = fmaxf(mx, ratio);
      k3 += round_t<T>(round_t<T>(ratio - delta) - 1.0f);
      ent += ce;
      n += 1.0f;
    }
  }
  auto add = [](float a, float b) { return a + b; };
  pg = block_reduce<kTokenThreads>(pg, red, add);
  ratio_sum = block_reduce<kTokenThreads>(ratio_sum, red, add);
  k3 = block_reduce<kTokenThreads>(k3, red, add);
  ent = block_reduce<kTokenThreads>(ent, red, add);
  sur = block_reduce<kTokenThreads>(sur, red, add);
  n = block_reduce<kTokenThreads>(n, red, add);
  mn = block_reduce<kTokenThreads>(mn, red, [](float a, float b) { return fminf(a, b); });
  mx = block_reduce<kTokenThreads>(mx, red, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) {
    scalars[kPg] = from_f<T>(pg);
    scalars[kRatio] = from_f<T>(ratio_sum);
    scalars[kMin] = from_f<T>(mn);
    scalars[kMax] = from_f<T>(mx);
    scalars[kK3] = from_f<T>(k3);
    scalars[kEntropy] = from_f<T>(ent);
    scalars[kSurrogate] = from_f<T>(sur);
    *count = n;
  }
}

/// 5. The fp32 outputs from the all-reduced scalars (the surrogate sum stays local, as in PKB).
template <typename T>
__global__ void finish(const T* scalars, const float* count, float* loss, float* metrics) {
  const float n = fmaxf(*count, 1.0f);  // n_valid_global.clamp(min=1.0)
  const float true_pg = __fdiv_rn(to_f(scalars[kPg]), n);
  const float surrogate = __fdiv_rn(to_f(scalars[kSurrogate]), n);
  *loss = __fsub_rn(__fadd_rn(true_pg, surrogate), surrogate);  // true_pg + surrogate - surrogate
  metrics[0] = __fdiv_rn(to_f(scalars[kRatio]), n);
  metrics[1] = to_f(scalars[kMin]);
  metrics[2] = to_f(scalars[kMax]);
  metrics[3] = __fdiv_rn(to_f(scalars[kK3]), n);
  metrics[4] = __fdiv_rn(to_f(scalars[kEntropy]), n);
}

cudaDataType_t cuda_type(pkb_dtype d) { return d == PKB_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

struct State {
  void* logits = nullptr;   // [M, V]
  void* lp = nullptr;       // [M]
  void* scalars = nullptr;  // [kScalars] of D
  float* count = nullptr;   // [1]
  size_t logit_bytes = 0, token_bytes = 0;
};

template <typename T>
int run(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor &h = in[0], &w = in[1], &labels = in[2], &old_lp = in[3], &adv = in[4];
  const int M = (int)h.shape[0], N = (int)h.shape[1], V = (int)w.shape[0];
  if ((size_t)M * V * sizeof(T) > st->logit_bytes || (size_t)M * sizeof(T) > st->token_bytes)
    PKB_FAIL_(ctx, "pkb_run", "the logits are larger than the scratch pkb_init sized from M and V");
  const long long ignore = ctx->param(ctx, "ignore_index", -100);
  cudaStream_t s = ctx->stream;
  const ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  T* sc = static_cast<T*>(st->scalars);

  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_type(ctx->dtype);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, V, M, N, &one, w.data, t, N, h.data, t, N, &zero,
                               st->logits, t, V, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  label_logprob<T><<<M, kRowThreads, 0, s>>>(static_cast<const T*>(st->logits),
                                             static_cast<const long long*>(labels.data), V, ignore,
                                             static_cast<T*>(st->lp));
  PKB_LAUNCH(ctx);
  token_terms<T><<<1, kTokenThreads, 0, s>>>(static_cast<const T*>(st->lp), static_cast<const long long*>(labels.data),
                                             static_cast<const T*>(old_lp.data), static_cast<const T*>(adv.data), M,
                                             ignore, static_cast<T*>(out[1].data), static_cast<T*>(out[2].data), sc,
                                             st->count);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(st->count, st->count, 1, ncclFloat32, ncclSum, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kPg, sc + kPg, 1, dt, ncclSum, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kRatio, sc + kRatio, 1, dt, ncclSum, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kMin, sc + kMin, 1, dt, ncclMin, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kMax, sc + kMax, 1, dt, ncclMax, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kK3, sc + kK3, 1, dt, ncclSum, ctx->comm, s));
  PKB_NCCL(ctx, ncclAllReduce(sc + kEntropy, sc + kEntropy, 1, dt, ncclSum, ctx->comm, s));
  finish<T><<<1, 1, 0, s>>>(sc, st->count, static_cast<float*>(out[0].data), static_cast<float*>(out[3].data));
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  const size_t e = pkb_dtype_size(ctx->dtype);
  st->token_bytes = (size_t)ctx->param(ctx, "M", 0) * e;
  st->logit_bytes = st->token_bytes * (size_t)ctx->param(ctx, "V", 0);
  PKB_CUDA(ctx, cudaMalloc(&st->logits, st->logit_bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->lp, st->token_bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->scalars, kScalars * e));
  PKB_CUDA(ctx, cudaMalloc(&st->count, sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, in, out);
    case PKB_FP32: return run<float>(ctx, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->logits));
  PKB_CUDA(ctx, cudaFree(st->lp));
  PKB_CUDA(ctx, cudaFree(st->scalars));
  PKB_CUDA(ctx, cudaFree(st->count));
  delete st;
  ctx->user = nullptr;
  return 0;
}
