// Baseline for problem 75 (Gated DeltaNet, Ulysses context parallelism), PKB's algorithm:
//
//   1. swap_outer (pack): q, k, v, gate, beta [L, W, HL * D] -> [W, L, HL * D], so that chunk j
//      (heads j HL .. (j+1) HL - 1 of every local token) is contiguous (PKB's reshape / permute /
//      contiguous before all_to_all_single).
//   2. all_to_all x 5 (grouped ncclSend / ncclRecv of chunk j with rank j): the received [W, L, HL, D]
//      is already the whole sequence [T, HL, D] of this rank's heads (PKB's permute back is free for
//      B = 1). PKB issues five all_to_all_single calls; here one NCCL group.
//   3. gate_normalize: one warp per (t, head), fp32 as PKB's _gated_delta_recurrent:
//        q' = q / max(|q|, 1e-6) * K^-1/2, k' = k / max(|k|, 1e-6)          (F.normalize, eps = 1e-6)
//        a = exp(-exp(a_log) * softplus(gate + dt_bias))                   (softplus threshold 20)
//      written head-major ([HL, T, K], [HL, T]); beta is used as given.
//   4. delta_rule_recurrence: PKB's per-step loop over all T steps, S (K x V per head, fp32) from zero:
//        S = S * a_t;  u = (v_t - k'_t^T S) * beta_t;  S = S + k'_t u^T;  o_t = q'_t^T S
//      o rounded to D (output.to(out_dtype)) as [T, HL, V].
//   5. all_to_all back: chunk j = rank j's tokens [j L, (j+1) L) (contiguous), received as
//      [W, L, HL * V]; swap_outer (unpack) -> [L, W, HL * V] = the output [L, HN, V].
//
// PKB's repeat_interleave of q and k is by value_heads // query_heads = 1 here (a no-op). The columns
// of S are independent, so step 4 gives every (head, column) its own warp: lane l holds rows l,
// l + 32, ... of the column; k'^T S and q'^T S are warp sums. PyTorch runs ~7 kernels per step.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace {

constexpr float kNormEps = 1e-6f;          // PKB: F.normalize(..., eps=1e-6)
constexpr float kSoftplusThreshold = 20.0f;  // F.softplus default (beta = 1)
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float softplus(float x) { return x > kSoftplusThreshold ? x : log1pf(expf(x)); }

struct Dims {
  int T;   // steps: the whole sequence
  int HL;  // heads on this rank
  int K, V;
};

// Purpose: steps 1 and 5, the layout change around each all-to-all.
// Approach: dst[b, a, :] = src[a, b, :] for src [A, B, C]; one thread per element, grid-stride.
template <typename T>
__global__ void swap_outer(const T* __restrict__ src, T* __restrict__ dst, long long A, long long B, long long C) {
  const long long n = A * B * C;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long c = i % C, r = i / C;
    const long long a = r % A, b = r / A;  // i indexes dst [B, A, C]
    dst[i] = src[(a * B + b) * C + c];
  }
}

// Purpose: step 3, the per-token decay and the L2 normalisation of q and k.
// Approach: one warp per (t, head); lanes stride over K; the two norms are warp sums.
// Inputs are [T, HL, K] (q, k) and [T, HL] (gate, beta); outputs head-major fp32.
template <typename T>
__global__ void gate_normalize(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ gate,
                               const T* __restrict__ beta, const __nv_bfloat16* __restrict__ a_log,
                               const __nv_bfloat16* __restrict__ dt_bias, float* __restrict__ qn,
                               float* __restrict__ kn, float* __restrict__ decay, float* __restrict__ beta_f,
                               Dims d, float scale) {
  const long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= static_cast<long long>(d.T) * d.HL) return;
  const int lane = threadIdx.x & 31;
  const int t = static_cast<int>(row / d.HL), h = static_cast<int>(row % d.HL);
  const long long src = row * d.K;                                     // [t, h, :]
  const long long dst = (static_cast<long long>(h) * d.T + t) * d.K;   // [h, t, :]
  float sq = 0.0f, sk = 0.0f;
  for (int i = lane; i < d.K; i += 32) {
    float a = to_f(q[src + i]), b = to_f(k[src + i]);
    sq += a * a;
    sk += b * b;
  }
  const float q_den = fmaxf(sqrtf(warp_sum(sq)), kNormEps);  // norm.clamp_min(eps)
  const float k_den = fmaxf(sqrtf(warp_sum(sk)), kNormEps);
  for (int i = lane; i < d.K; i += 32) {
    qn[dst + i] = to_f(q[src + i]) / q_den * scale;
    kn[dst + i] = to_f(k[src + i]) / k_den;
  }
  if (lane == 0) {
    const float a_scale = expf(__bfloat162float(a_log[h]));
    const float x = to_f(gate[row]) + __bfloat162float(dt_bias[h]);
    const long long o = static_cast<long long>(h) * d.T + t;
    decay[o] = expf(-a_scale * softplus(x));  // (-a_scale * softplus(gate + dt_bias)).exp()
    beta_f[o] = to_f(beta[row]);
  }
}

// The per-step values one lane needs: its KPL channels of k' and q'.
template <int KPL>
struct StepRow {
  float k[KPL], q[KPL];
};

template <int KPL>
__device__ __forceinline__ void load_step(StepRow<KPL>& r, const float* kn, const float* qn, long long off, int lane) {
#pragma unroll
  for (int e = 0; e < KPL; ++e) {
    r.k[e] = kn[off + lane + 32 * e];
    r.q[e] = qn[off + lane + 32 * e];
  }
}

// Purpose: step 4, the gated delta-rule recurrence over the whole sequence.
// Approach: one warp per (head h, value column j), its K-vector of S in registers (KPL = K / 32 per
// lane); the next step's k', q' are loaded before the current step's arithmetic so that the loads
// overlap the two dependent warp sums.
// Requirements: K = 32 KPL; inputs from gate_normalize; v and out are [T, HL, V] of D.
template <typename T, int KPL>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
delta_rule_recurrence(const float* __restrict__ qn, const float* __restrict__ kn, const float* __restrict__ decay,
                      const float* __restrict__ beta_f, const T* __restrict__ v, T* __restrict__ out, Dims d) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (warp >= static_cast<long long>(d.HL) * d.V) return;
  const int lane = threadIdx.x & 31;
  const int h = static_cast<int>(warp / d.V), j = static_cast<int>(warp % d.V);
  const long long head = static_cast<long long>(h) * d.T * d.K;
  const float* a = decay + static_cast<long long>(h) * d.T;
  const float* b = beta_f + static_cast<long long>(h) * d.T;
  float s[KPL];
#pragma unroll
  for (int e = 0; e < KPL; ++e) s[e] = 0.0f;
  StepRow<KPL> cur, next{};
  load_step(cur, kn, qn, head, lane);
  for (int t = 0; t < d.T; ++t) {
    if (t + 1 < d.T) load_step(next, kn, qn, head + static_cast<long long>(t + 1) * d.K, lane);
    const long long vo = (static_cast<long long>(t) * d.HL + h) * d.V + j;
    const float vj = to_f(v[vo]);
    const float at = a[t], bt = b[t];
    float p = 0.0f;
#pragma unroll
    for (int e = 0; e < KPL; ++e) {
      s[e] *= at;              // state = state * decay
      p += cur.k[e] * s[e];    // projected = k^T state
    }
    const float u = (vj - warp_sum(p)) * bt;  // update = (v - projected) * beta
    float o = 0.0f;
#pragma unroll
    for (int e = 0; e < KPL; ++e) {
      s[e] += cur.k[e] * u;    // state = state + k update^T
      o += cur.q[e] * s[e];    // output = q^T state
    }
    o = warp_sum(o);
    if (lane == 0) out[vo] = from_f<T>(o);
    cur = next;
  }
}

// Inputs 0..4 (q, k, v, gate, beta) and their per-token widths D.
constexpr int kExchanged = 5;

struct State {
  Dims cap{};                 // the shapes pkb_init sized the buffers for
  int L = 0, HN = 0;          // tokens per rank, heads in all
  void* send[kExchanged] = {};  // packed [W, L, HL * D] of D
  void* recv[kExchanged] = {};  // [T, HL, D] of D
  void* head_out = nullptr;   // [T, HL, V] of D
  void* back = nullptr;       // [W, L, HL * V] of D, received from every rank
  float *qn = nullptr, *kn = nullptr;       // fp32 [HL, T, K]
  float *decay = nullptr, *beta_f = nullptr;  // fp32 [HL, T]
};

unsigned blocks_for_warps(long long warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
unsigned grid_stride_blocks(long long n, const pkb_context* ctx) {
  const long long cap = 16LL * (ctx->topo.sm_count > 0 ? ctx->topo.sm_count : 132);
  const long long b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

template <typename T>
int launch_swap_outer(pkb_context* ctx, const void* src, void* dst, long long A, long long B, long long C) {
  swap_outer<T><<<grid_stride_blocks(A * B * C, ctx), kThreads, 0, ctx->stream>>>(static_cast<const T*>(src),
                                                                                  static_cast<T*>(dst), A, B, C);
  PKB_LAUNCH(ctx);
  return 0;
}

template <typename T, int KPL>
int launch_recurrence(pkb_context* ctx, const State* st, Dims d) {
  delta_rule_recurrence<T, KPL><<<blocks_for_warps(static_cast<long long>(d.HL) * d.V), kWarpsPerBlock * 32, 0,
                                  ctx->stream>>>(st->qn, st->kn, st->decay, st->beta_f,
                                                 static_cast<const T*>(st->recv[2]), static_cast<T*>(st->head_out), d);
  PKB_LAUNCH(ctx);
  return 0;
}

template <typename T>
int recurrence(pkb_context* ctx, const State* st, Dims d) {
  switch (d.K / 32) {
    case 1: return launch_recurrence<T, 1>(ctx, st, d);
    case 2: return launch_recurrence<T, 2>(ctx, st, d);
    case 3: return launch_recurrence<T, 3>(ctx, st, d);
    case 4: return launch_recurrence<T, 4>(ctx, st, d);
    case 5: return launch_recurrence<T, 5>(ctx, st, d);
    case 6: return launch_recurrence<T, 6>(ctx, st, d);
    case 7: return launch_recurrence<T, 7>(ctx, st, d);
    case 8: return launch_recurrence<T, 8>(ctx, st, d);
    default: PKB_FAIL_(ctx, "pkb_run", "K must be a multiple of 32, at most 256");
  }
}

template <typename T>
int run_typed(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  const State* st = static_cast<const State*>(ctx->user);
  const int W = ctx->world;
  const int L = static_cast<int>(in[0].shape[1]), HN = static_cast<int>(in[0].shape[2]);
  const Dims d{L * W, HN / W, static_cast<int>(in[0].shape[3]), static_cast<int>(in[2].shape[3])};
  if (L != st->L || HN != st->HN || d.T != st->cap.T || d.HL != st->cap.HL || d.K != st->cap.K || d.V != st->cap.V)
    PKB_FAIL_(ctx, "pkb_run", "input shapes differ from the size variables pkb_init sized its buffers for");
  cudaStream_t s = ctx->stream;
  const ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  const long long width[kExchanged] = {d.K, d.K, d.V, 1, 1};  // q, k, v, gate, beta

  // 1. Pack: chunk j = heads [j HL, (j+1) HL) of every local token.
  for (int i = 0; i < kExchanged; ++i)
    if (launch_swap_outer<T>(ctx, in[i].data, st->send[i], L, W, d.HL * width[i])) return 1;

  // 2. Sequence -> heads: chunk j goes to rank j; the chunk from rank j holds its tokens.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int i = 0; i < kExchanged; ++i) {
    const size_t chunk = static_cast<size_t>(L) * d.HL * width[i];
    for (int j = 0; j < W; ++j) {
      PKB_NCCL(ctx, ncclSend(static_cast<const T*>(st->send[i]) + j * chunk, chunk, dt, j, ctx->comm, s));
      PKB_NCCL(ctx, ncclRecv(static_cast<T*>(st->recv[i]) + j * chunk, chunk, dt, j, ctx->comm, s));
    }
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 3. Decay and normalisation.
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.K)));  // key_dim ** -0.5
  gate_normalize<T><<<blocks_for_warps(static_cast<long long>(d.T) * d.HL), kWarpsPerBlock * 32, 0, s>>>(
      static_cast<const T*>(st->recv[0]), static_cast<const T*>(st->recv[1]), static_cast<const T*>(st->recv[3]),
      static_cast<const T*>(st->recv[4]), static_cast<const __nv_bfloat16*>(in[5].data),
      static_cast<const __nv_bfloat16*>(in[6].data), st->qn, st->kn, st->decay, st->beta_f, d, scale);
  PKB_LAUNCH(ctx);

  // 4. The recurrence over all T steps, rounded to D.
  if (recurrence<T>(ctx, st, d)) return 1;

  // 5. Heads -> sequence: rank j gets its tokens of this rank's heads; unpack to [L, HN, V].
  const size_t chunk = static_cast<size_t>(L) * d.HL * d.V;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(static_cast<const T*>(st->head_out) + j * chunk, chunk, dt, j, ctx->comm, s));
    PKB_NCCL(ctx, ncclRecv(static_cast<T*>(st->back) + j * chunk, chunk, dt, j, ctx->comm, s));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return launch_swap_outer<T>(ctx, st->back, out[0].data, W, L, static_cast<long long>(d.HL) * d.V);
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  st->L = static_cast<int>(ctx->param(ctx, "L", 0));
  st->HN = static_cast<int>(ctx->param(ctx, "HN", 0));
  st->cap = Dims{static_cast<int>(ctx->param(ctx, "T", 0)), static_cast<int>(ctx->param(ctx, "HL", 0)),
                 static_cast<int>(ctx->param(ctx, "K", 0)), static_cast<int>(ctx->param(ctx, "V", 0))};
  const Dims& d = st->cap;
  const size_t e = pkb_dtype_size(ctx->dtype);
  const size_t th = static_cast<size_t>(d.T) * d.HL;  // = L HN: every exchanged buffer's rows
  const size_t width[kExchanged] = {static_cast<size_t>(d.K), static_cast<size_t>(d.K), static_cast<size_t>(d.V), 1,
                                    1};
  for (int i = 0; i < kExchanged; ++i) {
    PKB_CUDA(ctx, cudaMalloc(&st->send[i], th * width[i] * e));
    PKB_CUDA(ctx, cudaMalloc(&st->recv[i], th * width[i] * e));
  }
  PKB_CUDA(ctx, cudaMalloc(&st->head_out, th * d.V * e));
  PKB_CUDA(ctx, cudaMalloc(&st->back, th * d.V * e));
  for (float** p : {&st->qn, &st->kn}) PKB_CUDA(ctx, cudaMalloc(p, th * d.K * sizeof(float)));
  for (float** p : {&st->decay, &st->beta_f}) PKB_CUDA(ctx, cudaMalloc(p, th * sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  switch (ctx->dtype) {
    case PKB_BF16: return run_typed<__nv_bfloat16>(ctx, in, out);
    case PKB_FP16: return run_typed<__half>(ctx, in, out);
    case PKB_FP32: return run_typed<float>(ctx, in, out);
    default: ctx->set_error(ctx, "unsupported dtype"); return 1;
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (int i = 0; i < kExchanged; ++i) {
    PKB_CUDA(ctx, cudaFree(st->send[i]));
    PKB_CUDA(ctx, cudaFree(st->recv[i]));
  }
  PKB_CUDA(ctx, cudaFree(st->head_out));
  PKB_CUDA(ctx, cudaFree(st->back));
  for (float* p : {st->qn, st->kn, st->decay, st->beta_f}) PKB_CUDA(ctx, cudaFree(p));
  delete st;
  ctx->user = nullptr;
  return 0;
}
