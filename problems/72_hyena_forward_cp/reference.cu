// Baseline for problem 72 (Hyena long convolution under all-to-all context parallelism), in the order
// PKB's PyTorch code runs it, with NCCL for its four all_to_all_single and cuFFT for its transforms:
//   1. all_to_all_single of x1, x2 and v (PKB: three calls; here one NCCL group of their grouped
//      ncclSend / ncclRecv): block j of channels (j Cl .. (j+1) Cl - 1, contiguous since batch = 1)
//      goes to rank j; block j received holds rank j's two zigzag chunks of this rank's channels;
//   2. the inverse zigzag (PKB's permute + index_select), x2 * v in D, .float() and rfft's zero padding
//      to 2L: gate_and_pad reads each natural position t from the received block that holds it;
//   3. h.float() of the own filters, zero-padded to 2L: pad_filter;
//   4. torch.fft.rfft(n = 2L) of both: one R2C plan over the Cl channels, run twice;
//   5. the filter's spectrum / 2L times u's (PKB's two complex ops): spectral_product, in place;
//   6. torch.fft.irfft(n = 2L, norm = "forward", i.e. unscaled): one C2R plan;
//   7. [:L] + u bias (fp32), .to(D), x1 * that in D, the zigzag again and the send layout of the last
//      all-to-all: gate_output, one pass that writes every value where its sequence owner expects it;
//   8. all_to_all_single back (grouped ncclSend / ncclRecv): block j received = rank j's channels;
//   9. transpose(1, 2).contiguous(): transpose_out, [C][Ls] -> [Ls][C].
// PyTorch materialises every permute, index_select, cast, pad and elementwise op as its own pass;
// here those fold into the passes around the transforms, so the baseline is not slower than PyTorch.
// Roundings follow PKB: u = D(x2 v), the convolution and the bias term in fp32, y = D(...), z = D(x1 y).
// Buffers (per rank, reused call to call, all work ordered on ctx->stream): the three received
// projections, the send buffer of step 7, two fp32 [Cl][2L] buffers and two complex [Cl][L + 1].
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

#include <cufft.h>
#include <stdint.h>

#define PKB_CUFFT(ctx, call)                                                       \
  do {                                                                             \
    cufftResult pkb_e_ = (call);                                                   \
    if (pkb_e_ != CUFFT_SUCCESS) PKB_FAIL_(ctx, #call, cufft_result_name(pkb_e_)); \
  } while (0)

namespace {

const char* cufft_result_name(cufftResult r) {
  switch (r) {
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED (out of device memory for the plan's work area)";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED (is libcufft from the same CUDA toolkit?)";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    default: return "cuFFT error";
  }
}

template <typename T> __device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

/// D(a b) as PyTorch's elementwise product of two D tensors: the product in fp32, one rounding to D.
template <typename T> __device__ __forceinline__ T mul_d(T a, T b) { return from_f<T>(__fmul_rn(to_f(a), to_f(b))); }

/// The sizes every kernel needs (one rank's view).
struct Dims {
  uint32_t W, rank, C, Cl, Ls, Lc, L, F, G;
};

/// Offset in a received (or sent) block layout [W][Cl][Ls] of channel c at natural position t < L:
/// chunk k = t / Lc lives on rank k (first half) for k < W, else on rank 2W-1-k (second half).
__device__ __forceinline__ size_t zigzag_offset(const Dims& d, uint32_t c, uint32_t t) {
  const uint32_t k = t / d.Lc, off = t % d.Lc;
  const uint32_t owner = k < d.W ? k : 2 * d.W - 1 - k, col = k < d.W ? off : d.Lc + off;
  return ((size_t)owner * d.Cl + c) * d.Ls + col;
}

// Purpose: step 2, U[c][t] = float(D(x2 v)) at natural position t < L of local channel c, 0 for
// L <= t < 2L. Approach: one thread per element of U [Cl][2L], grid-stride.
template <typename T>
__global__ void gate_and_pad(const T* __restrict__ x2, const T* __restrict__ v, float* __restrict__ U, Dims d) {
  const size_t n = (size_t)d.Cl * 2 * d.L;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t c = (uint32_t)(i / (2 * d.L)), t = (uint32_t)(i % (2 * d.L));
    float u = 0.0f;
    if (t < d.L) {
      const size_t at = zigzag_offset(d, c, t);
      u = to_f(mul_d(x2[at], v[at]));
    }
    U[i] = u;
  }
}

// Purpose: step 3, Hp[c][t] = float(h[(rank Cl + c) / G][t]) for t < F, 0 up to 2L (PKB's h_local,
// repeat_interleave'd over the G channels of a filter). Approach: one thread per element, grid-stride.
template <typename T>
__global__ void pad_filter(const T* __restrict__ h, float* __restrict__ Hp, Dims d) {
  const size_t n = (size_t)d.Cl * 2 * d.L;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t c = (uint32_t)(i / (2 * d.L)), t = (uint32_t)(i % (2 * d.L));
    const size_t row = (size_t)(d.rank * d.Cl + c) / d.G;
    Hp[i] = t < d.F ? to_f(h[row * d.F + t]) : 0.0f;
  }
}

// Purpose: step 5, Uf = Uf * (Hf / n) per bin, as PKB's kernel_f = rfft(h) / fft_size and then
// u_f * kernel_f. Approach: one thread per bin, grid-stride.
__global__ void spectral_product(float2* __restrict__ Uf, const float2* __restrict__ Hf, size_t bins, float n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bins; i += (size_t)gridDim.x * blockDim.x) {
    const float2 k = make_float2(__fdiv_rn(Hf[i].x, n), __fdiv_rn(Hf[i].y, n)), u = Uf[i];
    Uf[i] = make_float2(u.x * k.x - u.y * k.y, u.x * k.y + u.y * k.x);
  }
}

// Purpose: step 7, send[j][c][o] = D(x1 D(Y[c][t] + u bias[g])) where (j, c, o) is where natural
// position t of local channel c (global g = rank Cl + c) goes back to: the same offset in the block
// layout that x1, x2 and v arrived in, so x1 and u = D(x2 v) are read at i itself. Approach: one
// thread per element of the send layout [W][Cl][Ls], grid-stride.
template <typename T>
__global__ void gate_output(const T* __restrict__ x1, const T* __restrict__ x2, const T* __restrict__ v,
                            const T* __restrict__ bias, const float* __restrict__ Y, T* __restrict__ send, Dims d) {
  const size_t n = (size_t)d.W * d.Cl * d.Ls;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t o = (uint32_t)(i % d.Ls), c = (uint32_t)((i / d.Ls) % d.Cl), j = (uint32_t)(i / ((size_t)d.Ls * d.Cl));
    const uint32_t k = o < d.Lc ? j : 2 * d.W - 1 - j, t = k * d.Lc + o % d.Lc;
    const float u = to_f(mul_d(x2[i], v[i]));
    const float y = __fadd_rn(Y[(size_t)c * 2 * d.L + t], __fmul_rn(u, to_f(bias[d.rank * d.Cl + c])));
    send[i] = mul_d(x1[i], from_f<T>(y));
  }
}

constexpr int kTile = 32;        // transpose tile edge
constexpr int kRowsPerPass = 8;  // tile rows a 32 x 8 block moves per pass
constexpr unsigned kThreads = 256;

// Purpose: step 9, out [Ls][C] = z [C][Ls]. Approach: 32 x 32 tiles through shared memory (coalesced
// reads and writes). Grid: (Ls / 32, C / 32) rounded up, block 32 x 8.
template <typename T>
__global__ void transpose_out(const T* __restrict__ z, T* __restrict__ out, uint32_t C, uint32_t Ls) {
  __shared__ T tile[kTile][kTile + 1];
  const uint32_t s0 = blockIdx.x * kTile, g0 = blockIdx.y * kTile;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t g = g0 + i, s = s0 + threadIdx.x;
    if (g < C && s < Ls) tile[i][threadIdx.x] = z[(size_t)g * Ls + s];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t s = s0 + i, g = g0 + threadIdx.x;
    if (g < C && s < Ls) out[(size_t)s * C + g] = tile[threadIdx.x][i];
  }
}

// Blocks for a grid-stride kernel over n elements (the loop covers any excess).
unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535 * 16 ? b : 65535 * 16);
}

struct State {
  cufftHandle forward = 0;  // R2C, length 2L, batch Cl, contiguous
  cufftHandle inverse = 0;  // C2R, length 2L, batch Cl, contiguous
  bool has_forward = false, has_inverse = false;
  void* recv[3] = {nullptr, nullptr, nullptr};  // x1, x2, v: [W][Cl][Ls] of D, block j from rank j
  void* send = nullptr;                         // z in the send layout [W][Cl][Ls] of D
  float* U = nullptr;                           // u padded to 2L, then the convolution Y: [Cl][2L]
  float* Hp = nullptr;                          // the own filters padded to 2L: [Cl][2L]
  float2* Uf = nullptr;                         // u's spectrum, then the product: [Cl][L + 1]
  float2* Hf = nullptr;                         // the filters' spectrum: [Cl][L + 1]
  Dims d{};
};

/// One all_to_all_single of [W][Cl][Ls] blocks of D: block j of `send` to rank j, rank j's into
/// block j of `recv` (grouped sends and receives, as PyTorch runs it). Call inside a group or not.
int all_to_all(pkb_context* ctx, const void* send, void* recv, size_t block, size_t esize) {
  const ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < ctx->world; ++j) {
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(send) + j * block * esize, block, dt, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(recv) + j * block * esize, block, dt, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

template <typename T>
int run_typed(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  State* s = static_cast<State*>(ctx->user);
  const Dims& d = s->d;
  const size_t block = (size_t)d.Cl * d.Ls, esize = sizeof(T), padded = (size_t)d.Cl * 2 * d.L;
  const T* x1 = static_cast<const T*>(s->recv[0]);
  const T* x2 = static_cast<const T*>(s->recv[1]);
  const T* v = static_cast<const T*>(s->recv[2]);
  // 1. x1, x2, v to channel shards, in one NCCL group.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int p = 0; p < 3; ++p)
    if (all_to_all(ctx, in[p].data, s->recv[p], block, esize)) return 1;
  PKB_NCCL(ctx, ncclGroupEnd());
  // 2-4. Padded fp32 signal and filters, and their spectra.
  gate_and_pad<T><<<blocks_for(padded), kThreads, 0, ctx->stream>>>(x2, v, s->U, d);
  PKB_LAUNCH(ctx);
  pad_filter<T><<<blocks_for(padded), kThreads, 0, ctx->stream>>>(static_cast<const T*>(in[3].data), s->Hp, d);
  PKB_LAUNCH(ctx);
  PKB_CUFFT(ctx, cufftExecR2C(s->forward, s->U, reinterpret_cast<cufftComplex*>(s->Uf)));
  PKB_CUFFT(ctx, cufftExecR2C(s->forward, s->Hp, reinterpret_cast<cufftComplex*>(s->Hf)));
  // 5-6. Product of the spectra, inverse transform (unscaled) into U.
  const size_t bins = (size_t)d.Cl * (d.L + 1);
  spectral_product<<<blocks_for(bins), kThreads, 0, ctx->stream>>>(s->Uf, s->Hf, bins, (float)(2.0 * d.L));
  PKB_LAUNCH(ctx);
  PKB_CUFFT(ctx, cufftExecC2R(s->inverse, reinterpret_cast<cufftComplex*>(s->Uf), s->U));
  // 7. Bias, gate, zigzag: the send buffer of the last all-to-all.
  T* send = static_cast<T*>(s->send);
  gate_output<T><<<blocks_for((size_t)d.W * block), kThreads, 0, ctx->stream>>>(
      x1, x2, v, static_cast<const T*>(in[4].data), s->U, send, d);
  PKB_LAUNCH(ctx);
  // 8. Back to sequence shards, into x2's receive buffer (free after step 7): [C][Ls].
  if (all_to_all(ctx, send, s->recv[1], block, esize)) return 1;
  // 9. [1, C, Ls] -> [1, Ls, C].
  const dim3 grid((d.Ls + kTile - 1) / kTile, (d.C + kTile - 1) / kTile), tile_block(kTile, kRowsPerPass);
  transpose_out<T><<<grid, tile_block, 0, ctx->stream>>>(x2, static_cast<T*>(out[0].data), d.C, d.Ls);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  Dims& d = s->d;
  d.W = (uint32_t)ctx->world;
  d.rank = (uint32_t)ctx->rank;
  d.C = (uint32_t)ctx->param(ctx, "C", 0);
  d.Cl = (uint32_t)ctx->param(ctx, "Cl", 0);
  d.Ls = (uint32_t)ctx->param(ctx, "Ls", 0);
  d.Lc = (uint32_t)ctx->param(ctx, "Lc", 0);
  d.L = (uint32_t)ctx->param(ctx, "L", 0);
  d.F = (uint32_t)ctx->param(ctx, "F", 0);
  d.G = (uint32_t)ctx->param(ctx, "G", 1);
  const size_t proj = (size_t)d.C * d.Ls * pkb_dtype_size(ctx->dtype);
  for (void*& r : s->recv) PKB_CUDA(ctx, cudaMalloc(&r, proj));
  PKB_CUDA(ctx, cudaMalloc(&s->send, proj));
  PKB_CUDA(ctx, cudaMalloc(&s->U, (size_t)d.Cl * 2 * d.L * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&s->Hp, (size_t)d.Cl * 2 * d.L * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&s->Uf, (size_t)d.Cl * (d.L + 1) * sizeof(float2)));
  PKB_CUDA(ctx, cudaMalloc(&s->Hf, (size_t)d.Cl * (d.L + 1) * sizeof(float2)));
  // Basic (contiguous) layouts: real rows 2L apart, their half spectra L + 1 apart.
  int n = (int)(2 * d.L);
  PKB_CUFFT(ctx, cufftPlanMany(&s->forward, 1, &n, nullptr, 1, n, nullptr, 1, n / 2 + 1, CUFFT_R2C, (int)d.Cl));
  s->has_forward = true;
  PKB_CUFFT(ctx, cufftPlanMany(&s->inverse, 1, &n, nullptr, 1, n / 2 + 1, nullptr, 1, n, CUFFT_C2R, (int)d.Cl));
  s->has_inverse = true;
  PKB_CUFFT(ctx, cufftSetStream(s->forward, ctx->stream));
  PKB_CUFFT(ctx, cufftSetStream(s->inverse, ctx->stream));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  const Dims& d = static_cast<State*>(ctx->user)->d;
  for (int p = 0; p < 3; ++p)
    if (in[p].ndim != 3 || in[p].shape[0] != 1 || in[p].shape[1] != d.C || in[p].shape[2] != d.Ls) {
      ctx->set_error(ctx, "x1_seq, x2_seq or v_seq differs from [1, C, Ls] of the spec's sizes (the plans were made for those)");
      return 1;
    }
  if (in[3].shape[1] != d.F || out[0].shape[1] != d.Ls || out[0].shape[2] != d.C) {
    ctx->set_error(ctx, "h or out differs from [C / G, F] / [1, Ls, C] of the spec's sizes");
    return 1;
  }
  switch (ctx->dtype) {
    case PKB_BF16: return run_typed<__nv_bfloat16>(ctx, in, out);
    case PKB_FP16: return run_typed<__half>(ctx, in, out);
    case PKB_FP32: return run_typed<float>(ctx, in, out);
    default: ctx->set_error(ctx, "unsupported dtype (bf16, fp16 or fp32)"); return 1;
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  if (s->has_forward) PKB_CUFFT(ctx, cufftDestroy(s->forward));
  if (s->has_inverse) PKB_CUFFT(ctx, cufftDestroy(s->inverse));
  for (void* r : s->recv) PKB_CUDA(ctx, cudaFree(r));
  PKB_CUDA(ctx, cudaFree(s->send));
  PKB_CUDA(ctx, cudaFree(s->U));
  PKB_CUDA(ctx, cudaFree(s->Hp));
  PKB_CUDA(ctx, cudaFree(s->Uf));
  PKB_CUDA(ctx, cudaFree(s->Hf));
  delete s;
  ctx->user = nullptr;
  return 0;
}
