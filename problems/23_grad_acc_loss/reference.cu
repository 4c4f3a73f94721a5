// Baseline for problem 23 (global-valid-token loss normalization, forward and analytic backward).
// PKB, step by step (every tensor 0-d; int64 counts are cast to D inside each op, each op computes in
// fp32 and rounds to D):
//   1. local_valid_tokens.item() on the host (a synchronization); if it is 0, loss = nan_to_num(loss);
//   2. loss_sum = loss * local, dist.all_reduce(SUM) in D;
//   3. normalized_loss = loss_sum / global (a true fp32 division of a CUDA tensor, not a reciprocal);
//   4. grad_loss = (g_norm * local) / global + g_sum * local.
// Here: the host read as PKB does it, one single-thread kernel for step 2's product, ncclAllReduce in
// place on the loss_sum output, and one single-thread kernel for steps 3 and 4 (PyTorch runs seven
// kernels plus the all-reduce). Explicit _rn intrinsics keep PyTorch's roundings (no fma contraction).
#include <pkb/solution.h>

#include <cuda_bf16.h>

#include <cstdint>

namespace {

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/// An int64 count as PyTorch casts it to D: to fp32 (round to nearest), then to D.
template <typename T>
__device__ __forceinline__ float count_in_d(int64_t n) {
  return to_f(from_f<T>(__ll2float_rn(n)));
}

/// torch.nan_to_num for D: NaN -> 0, +-inf -> the largest finite D value of that sign.
template <typename T> __device__ __forceinline__ float d_max();
template <> __device__ __forceinline__ float d_max<float>() { return 3.402823466e38f; }
template <> __device__ __forceinline__ float d_max<__nv_bfloat16>() { return 3.38953139e38f; }

template <typename T>
__device__ __forceinline__ float nan_to_num(float v) {
  if (isnan(v)) return 0.0f;
  if (isinf(v)) return v > 0 ? d_max<T>() : -d_max<T>();
  return v;
}

/// loss_sum = D(loss * D(local)), with PKB's nan_to_num when the host saw local == 0.
template <typename T>
__global__ void local_loss_sum(const T* loss, const int64_t* local, T* loss_sum, int zero_tokens) {
  float l = to_f(*loss);
  if (zero_tokens) l = nan_to_num<T>(l);
  *loss_sum = from_f<T>(__fmul_rn(l, count_in_d<T>(*local)));
}

/// normalized = D(loss_sum / D(global)); grad = D(D(D(g_norm * D(local)) / D(global)) + D(g_sum * D(local))).
template <typename T>
__global__ void normalize_and_grad(const T* loss_sum, const int64_t* local, const int64_t* global, const T* g_norm,
                                   const T* g_sum, T* normalized, T* grad) {
  const float loc = count_in_d<T>(*local), glob = count_in_d<T>(*global);
  *normalized = from_f<T>(__fdiv_rn(to_f(*loss_sum), glob));
  const float from_norm = to_f(from_f<T>(__fdiv_rn(to_f(from_f<T>(__fmul_rn(to_f(*g_norm), loc))), glob)));
  const float from_sum = to_f(from_f<T>(__fmul_rn(to_f(*g_sum), loc)));
  *grad = from_f<T>(__fadd_rn(from_norm, from_sum));
}

struct Scratch {
  int64_t* host_local = nullptr;  // pinned: PKB's .item()
};

template <typename T>
int run(pkb_context* ctx, Scratch* s, const pkb_tensor* in, pkb_tensor* out) {
  const T* loss = static_cast<const T*>(in[0].data);
  const int64_t* local = static_cast<const int64_t*>(in[1].data);
  const int64_t* global = static_cast<const int64_t*>(in[2].data);
  const T* g_norm = static_cast<const T*>(in[3].data);
  const T* g_sum = static_cast<const T*>(in[4].data);
  T* normalized = static_cast<T*>(out[0].data);
  T* loss_sum = static_cast<T*>(out[1].data);
  T* grad = static_cast<T*>(out[2].data);
  cudaStream_t st = ctx->stream;

  // 1. PKB's host-side test of the local token count.
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_local, local, sizeof(int64_t), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  // 2. The token-weighted local loss, summed over every rank in D.
  local_loss_sum<T><<<1, 1, 0, st>>>(loss, local, loss_sum, *s->host_local == 0 ? 1 : 0);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(loss_sum, loss_sum, 1, pkb_nccl_dtype(ctx->dtype), ncclSum, ctx->comm, st));
  // 3 and 4.
  normalize_and_grad<T><<<1, 1, 0, st>>>(loss_sum, local, global, g_norm, g_sum, normalized, grad);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  PKB_CUDA(ctx, cudaMallocHost(&s->host_local, sizeof(int64_t)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, s, in, out);
    case PKB_FP32: return run<float>(ctx, s, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* s = static_cast<Scratch*>(ctx->user);
  if (s) {
    cudaFreeHost(s->host_local);
    delete s;
  }
  ctx->user = nullptr;
  return 0;
}
