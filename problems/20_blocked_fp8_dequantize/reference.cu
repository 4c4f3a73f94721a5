// Baseline for problem 20 (block dequantization, then an all-to-all). PKB:
//   a Triton kernel, one program per 128-element block of the flattened [W, M, N] y: x = float(y) *
//   float(s[block]) into an fp32 [W, M, N] buffer;
//   dist.all_to_all_single(out, x), equal splits: chunk j to rank j.
// Here:
//   1. dequant_kernel: the same single fp32 multiply per element (no other rounding), 4 elements per
//      thread (one 16-byte store), into an fp32 staging buffer;
//   2. grouped ncclSend/ncclRecv with every rank (what all_to_all_single runs for equal splits).
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 4;  // elements per thread; BS is a multiple of it, so a group has one scale

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <typename T>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

/// x[i] = float(y[i]) * float(s[i / bs]) for i in groups of kVec (n is a multiple of kVec).
template <typename T>
__global__ void dequant_kernel(const T* __restrict__ y, const T* __restrict__ s, float4* __restrict__ x, int64_t groups,
                               int64_t bs) {
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
    const Pack<T> p = reinterpret_cast<const Pack<T>*>(y)[g];
    const float scale = to_f(s[g * kVec / bs]);
    x[g] = make_float4(__fmul_rn(to_f(p.v[0]), scale), __fmul_rn(to_f(p.v[1]), scale),
                       __fmul_rn(to_f(p.v[2]), scale), __fmul_rn(to_f(p.v[3]), scale));
  }
}

unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

struct Scratch {
  float* x = nullptr;  // [W, M, N] fp32: the dequantized chunks before the exchange
  int64_t numel = 0;
};

template <typename T>
int run(pkb_context* ctx, Scratch* sc, const pkb_tensor* in, pkb_tensor* out) {
  const pkb_tensor &y = in[0], &s = in[1];
  const int64_t n = pkb_numel(&y);
  const int64_t bs = ctx->param(ctx, "BS", 128);
  if (n > sc->numel) PKB_FAIL_(ctx, "pkb_run", "staging buffer smaller than local_y");
  if (bs % kVec != 0 || n % bs != 0) PKB_FAIL_(ctx, "pkb_run", "BS must be a multiple of 4 dividing numel(local_y)");
  if (pkb_numel(&s) * bs != n) PKB_FAIL_(ctx, "pkb_run", "local_s must hold one scale per BS elements of local_y");
  cudaStream_t st = ctx->stream;

  dequant_kernel<T><<<grid_for(n / kVec), kThreads, 0, st>>>(static_cast<const T*>(y.data),
                                                             static_cast<const T*>(s.data),
                                                             reinterpret_cast<float4*>(sc->x), n / kVec, bs);
  PKB_LAUNCH(ctx);

  const int W = ctx->world;
  const size_t chunk = static_cast<size_t>(n / W);
  float* dst = static_cast<float*>(out[0].data);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    PKB_NCCL(ctx, ncclSend(sc->x + r * chunk, chunk, ncclFloat32, r, ctx->comm, st));
    PKB_NCCL(ctx, ncclRecv(dst + r * chunk, chunk, ncclFloat32, r, ctx->comm, st));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* sc = new Scratch;
  ctx->user = sc;
  sc->numel = ctx->world * ctx->param(ctx, "M", 0) * ctx->param(ctx, "N", 0);
  PKB_CUDA(ctx, cudaMalloc(&sc->x, (size_t)sc->numel * sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* sc = static_cast<Scratch*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, sc, in, out);
    case PKB_FP16: return run<__half>(ctx, sc, in, out);
    case PKB_FP32: return run<float>(ctx, sc, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "dtype must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* sc = static_cast<Scratch*>(ctx->user);
  if (sc) {
    cudaFree(sc->x);
    delete sc;
  }
  ctx->user = nullptr;
  return 0;
}
