// Baseline for problem 17 (RoPE on a sequence shard, then an all-gather along the sequence). PKB:
//   q_embed = q * cos + rotate_half(q) * sin (cos/sin unsqueezed over the heads), the same for k, each
//   op a separate PyTorch kernel rounding to D (two products, then their sum);
//   dist.all_gather of q_embed into a list of W tensors, the same for k;
//   torch.cat of each list along the sequence (dim 1).
// Here:
//   1. rope_kernel: q and k in one launch, one thread per (d, d + Dh/2) pair of a head, the three D
//      roundings of PyTorch kept (no fma contraction);
//   2. ncclAllGather of q_embed, then of k_embed (PKB's two calls), into [W][B S H Dh] scratch;
//   3. cat_kernel: both gathered tensors reordered to [B][W S][H Dh] in one launch (16-byte copies).
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

/// D(D(x * c) + D(r * s)), each op rounded as a separate PyTorch kernel rounds it.
template <typename T>
__device__ __forceinline__ T rope_one(T x, T c, T r, T s) {
  T a = from_f<T>(__fmul_rn(to_f(x), to_f(c)));
  T b = from_f<T>(__fmul_rn(to_f(r), to_f(s)));
  return from_f<T>(__fadd_rn(to_f(a), to_f(b)));
}

/// Purpose: q_embed and k_embed of this rank's shard.
/// Approach: thread t handles pair (d, d + half) of row t / half (a row is one head of one position)
/// of q (the first rows * half threads) or k (the rest); rotate_half gives -x[d + half] at d and
/// x[d] at d + half.
template <typename T>
__global__ void rope_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ cos,
                            const T* __restrict__ sin, T* __restrict__ q_out, T* __restrict__ k_out, int64_t rows,
                            int heads, int dh) {
  const int half = dh / 2;
  const int64_t per_tensor = rows * half;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < 2 * per_tensor;
       t += (int64_t)gridDim.x * blockDim.x) {
    const bool is_k = t >= per_tensor;
    const int64_t u = is_k ? t - per_tensor : t;
    const int64_t row = u / half;
    const int d = static_cast<int>(u % half);
    const T* x = (is_k ? k : q) + row * dh;
    T* y = (is_k ? k_out : q_out) + row * dh;
    const T* c = cos + (row / heads) * dh;  // cos/sin rows are per (b, s), shared by the heads
    const T* s = sin + (row / heads) * dh;
    const T lo = x[d], hi = x[d + half];
    y[d] = rope_one(lo, c[d], from_f<T>(-to_f(hi)), s[d]);
    y[d + half] = rope_one(hi, c[d + half], lo, s[d + half]);
  }
}

/// Purpose: torch.cat(gathered list, dim=1) for q and k at once.
/// Approach: gathered[j] is [B][chunk] (chunk = S H Dh elements, a whole number of 16-byte units);
/// out[b][j chunk + i] = gathered[j][b][i]; 16-byte units, rank-major on the source side.
__global__ void cat_kernel(const uint4* __restrict__ gq, const uint4* __restrict__ gk, uint4* __restrict__ oq,
                           uint4* __restrict__ ok, int64_t batches, int64_t chunk_units, int world) {
  const int64_t per_tensor = (int64_t)world * batches * chunk_units;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < 2 * per_tensor;
       t += (int64_t)gridDim.x * blockDim.x) {
    const bool is_k = t >= per_tensor;
    const int64_t u = is_k ? t - per_tensor : t;  // index into gathered [W][B][chunk]
    const int64_t i = u % chunk_units;
    const int64_t b = (u / chunk_units) % batches;
    const int64_t j = u / (chunk_units * batches);
    (is_k ? ok : oq)[(b * world + j) * chunk_units + i] = (is_k ? gk : gq)[u];
  }
}

unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

struct Scratch {
  void* embed = nullptr;     // [2][B S H Dh]: q_embed, k_embed
  void* gathered = nullptr;  // [2][W][B S H Dh]
  size_t local_bytes = 0;    // B S H Dh elements of D
};

template <typename T>
int run(pkb_context* ctx, Scratch* s, const pkb_tensor* in, pkb_tensor* out) {
  const pkb_tensor &q = in[0], &k = in[1], &cos = in[2], &sin = in[3];
  const int64_t B = q.shape[0], S = q.shape[1], H = q.shape[2], Dh = q.shape[3];
  const int64_t n = B * S * H * Dh;
  const int W = ctx->world;
  if (n * (int64_t)sizeof(T) > (int64_t)s->local_bytes) PKB_FAIL_(ctx, "pkb_run", "scratch smaller than q_local");
  cudaStream_t st = ctx->stream;
  T* q_embed = static_cast<T*>(s->embed);
  T* k_embed = q_embed + n;

  rope_kernel<T><<<grid_for(B * S * H * (Dh / 2) * 2), kThreads, 0, st>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(cos.data),
      static_cast<const T*>(sin.data), q_embed, k_embed, B * S * H, static_cast<int>(H), static_cast<int>(Dh));
  PKB_LAUNCH(ctx);

  const ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  T* gq = static_cast<T*>(s->gathered);
  T* gk = gq + (int64_t)W * n;
  PKB_NCCL(ctx, ncclAllGather(q_embed, gq, (size_t)n, dt, ctx->comm, st));
  PKB_NCCL(ctx, ncclAllGather(k_embed, gk, (size_t)n, dt, ctx->comm, st));
  const int64_t chunk_bytes = S * H * Dh * (int64_t)sizeof(T);
  if (chunk_bytes % 16 != 0) PKB_FAIL_(ctx, "pkb_run", "S H Dh elements must be a multiple of 16 bytes");
  const int64_t chunk_units = chunk_bytes / 16;
  cat_kernel<<<grid_for(2 * W * B * chunk_units), kThreads, 0, st>>>(
      reinterpret_cast<const uint4*>(gq), reinterpret_cast<const uint4*>(gk), static_cast<uint4*>(out[0].data),
      static_cast<uint4*>(out[1].data), B, chunk_units, W);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  const int64_t B = ctx->param(ctx, "B", 0), S = ctx->param(ctx, "S", 0), H = ctx->param(ctx, "H", 0),
                Dh = ctx->param(ctx, "Dh", 0);
  s->local_bytes = (size_t)(B * S * H * Dh) * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->embed, 2 * s->local_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->gathered, 2 * (size_t)ctx->world * s->local_bytes));
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
    cudaFree(s->embed);
    cudaFree(s->gathered);
    delete s;
  }
  ctx->user = nullptr;
  return 0;
}
