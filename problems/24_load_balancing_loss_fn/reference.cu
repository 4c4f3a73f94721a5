// Baseline for problem 24 (MoE load-balancing loss, averaged over the data-parallel ranks). PKB (with
// pkb's router_bias added first, as the adapter does: x = D(gate_logits + router_bias)):
//   p = softmax(x, dim=-1) in D (PyTorch's warp softmax: fp32 max, expf(x - max), a butterfly sum over
//   the 8 lanes, then e / sum rounded to D); top-2 of p per token; f[k][e] = mean of one_hot(choice k)
//   as fp32; P[e] = mean of p over the tokens (fp32 accumulation, times the fp32 1/M, rounded to D);
//   loss = E * sum(f * P) in fp32; dist.all_reduce(SUM); loss / W (times the fp32 1/W).
// Here:
//   1. route_tokens: one thread per token (grid-stride) does the add, the softmax, the top-2 (strict
//      >, so ties go to the lower expert index) and accumulates; per block, the 16 choice counts
//      (shared integer atomics) and the 8 probability sums (a fixed-order tree) go to scratch;
//   2. finish_loss: one block adds the per-block partials in block order and forms the local loss;
//   3. ncclAllReduce (fp32 sum) into the output, then scale_by: times 1/W.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace {

constexpr int kE = 8;  // PKB: num_experts = 8
constexpr int kK = 2;  // PKB: top_k = 2
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__device__ __forceinline__ float round_d(float v) { return to_f(from_f<T>(v)); }

/// Per-block partials: counts[k][e] of tokens whose k-th choice is e, and sums of p[e].
struct Partial {
  int counts[kK * kE];
  float prob_sums[kE];
};

/// Purpose: the per-token softmax and top-2, reduced per block.
/// Approach: a thread per token; the softmax sum uses PyTorch's 8-lane butterfly order
/// ((e0 + e4) + (e2 + e6)) + ((e1 + e5) + (e3 + e7)).
template <typename T>
__global__ void __launch_bounds__(kThreads) route_tokens(const T* __restrict__ logits, const T* __restrict__ bias,
                                                         int64_t tokens, Partial* __restrict__ partial) {
  __shared__ int counts[kK * kE];
  __shared__ float red[kE][kThreads];
  if (threadIdx.x < kK * kE) counts[threadIdx.x] = 0;
  float b[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) b[e] = to_f(bias[e]);
  __syncthreads();

  float psum[kE] = {};
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < tokens; t += (int64_t)gridDim.x * blockDim.x) {
    float x[kE];
    float m = -INFINITY;
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      x[e] = round_d<T>(__fadd_rn(to_f(logits[t * kE + e]), b[e]));
      m = fmaxf(m, x[e]);
    }
    float ex[kE];
#pragma unroll
    for (int e = 0; e < kE; ++e) ex[e] = expf(__fsub_rn(x[e], m));
    const float sum = __fadd_rn(__fadd_rn(__fadd_rn(ex[0], ex[4]), __fadd_rn(ex[2], ex[6])),
                                __fadd_rn(__fadd_rn(ex[1], ex[5]), __fadd_rn(ex[3], ex[7])));
    int first = -1, second = -1;
    float p1 = -1.0f, p2 = -1.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const float p = round_d<T>(__fdiv_rn(ex[e], sum));
      psum[e] += p;
      if (p > p1) {
        second = first, p2 = p1;
        first = e, p1 = p;
      } else if (p > p2) {
        second = e, p2 = p;
      }
    }
    atomicAdd(&counts[first], 1);
    atomicAdd(&counts[kE + second], 1);
  }
#pragma unroll
  for (int e = 0; e < kE; ++e) red[e][threadIdx.x] = psum[e];
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
#pragma unroll
      for (int e = 0; e < kE; ++e) red[e][threadIdx.x] += red[e][threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x < kK * kE) partial[blockIdx.x].counts[threadIdx.x] = counts[threadIdx.x];
  if (threadIdx.x < kE) partial[blockIdx.x].prob_sums[threadIdx.x] = red[threadIdx.x][0];
}

/// *loss = E * sum over k, e of f[k][e] * float(P[e]), f = count * (1/M), P = D(prob_sum * (1/M)).
template <typename T>
__global__ void finish_loss(const Partial* __restrict__ partial, int blocks, int64_t tokens, float* __restrict__ loss) {
  __shared__ float f[kK * kE];
  __shared__ float P[kE];
  const float inv_m = 1.0f / static_cast<float>(tokens);  // PyTorch's mean factor
  const int l = threadIdx.x;
  if (l < kE) {
    float s = 0.0f;
    for (int b = 0; b < blocks; ++b) s += partial[b].prob_sums[l];
    P[l] = round_d<T>(__fmul_rn(s, inv_m));
  } else if (l < kE + kK * kE) {
    int c = 0;
    for (int b = 0; b < blocks; ++b) c += partial[b].counts[l - kE];
    f[l - kE] = __fmul_rn(static_cast<float>(c), inv_m);
  }
  __syncthreads();
  if (l == 0) {
    float s = 0.0f;
    for (int k = 0; k < kK; ++k)
      for (int e = 0; e < kE; ++e) s = __fadd_rn(s, __fmul_rn(f[k * kE + e], P[e]));
    *loss = __fmul_rn(s, static_cast<float>(kE));
  }
}

/// *x = *x * s (PyTorch's tensor / int: a multiply by the fp32 reciprocal).
__global__ void scale_by(float* x, float s) { *x = __fmul_rn(*x, s); }

struct Scratch {
  Partial* partial = nullptr;  // [kMaxBlocks]
  float* local_loss = nullptr;
};

template <typename T>
int run(pkb_context* ctx, Scratch* s, const pkb_tensor* in, pkb_tensor* out) {
  const pkb_tensor &logits = in[0], &bias = in[1];
  if (logits.shape[1] != kE || ctx->param(ctx, "K", kK) != kK)
    PKB_FAIL_(ctx, "pkb_run", "the baseline is built for 8 experts and top-2");
  const int64_t tokens = logits.shape[0];
  int64_t want = (tokens + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(want < 1 ? 1 : (want > kMaxBlocks ? kMaxBlocks : want));
  cudaStream_t st = ctx->stream;
  float* loss = static_cast<float*>(out[0].data);

  route_tokens<T><<<blocks, kThreads, 0, st>>>(static_cast<const T*>(logits.data), static_cast<const T*>(bias.data),
                                               tokens, s->partial);
  PKB_LAUNCH(ctx);
  finish_loss<T><<<1, 32, 0, st>>>(s->partial, blocks, tokens, s->local_loss);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(s->local_loss, loss, 1, ncclFloat32, ncclSum, ctx->comm, st));
  scale_by<<<1, 1, 0, st>>>(loss, 1.0f / static_cast<float>(ctx->world));
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  PKB_CUDA(ctx, cudaMalloc(&s->partial, kMaxBlocks * sizeof(Partial)));
  PKB_CUDA(ctx, cudaMalloc(&s->local_loss, sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, s, in, out);
    case PKB_FP16: return run<__half>(ctx, s, in, out);
    case PKB_FP32: return run<float>(ctx, s, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* s = static_cast<Scratch*>(ctx->user);
  if (s) {
    cudaFree(s->partial);
    cudaFree(s->local_loss);
    delete s;
  }
  ctx->user = nullptr;
  return 0;
}
