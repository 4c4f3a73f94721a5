// Building blocks shared by the expert solutions of problems 1-8: 16-byte packs, fp32 accumulation,
// peer pointers through the NCCL window, per-block LSA barriers, double-buffered symmetric staging.
//
// Conventions every expert kernel follows (they are what makes per-block barriers sufficient):
//   * all ranks launch the same grid for the same call;
//   * every phase walks chunk-relative vector indices j with the same grid-stride loop, so vector j
//     of any chunk is always handled by the same block on every rank — a block only ever reads what
//     the same block on a peer wrote before their common barrier;
//   * staging buffers are double-buffered by call parity: call k writes half k % 2, and any rank that
//     reaches call k's barrier has finished every read of call k - 1, so the half written next was
//     last read two calls ago. One barrier per exchange phase, none at the end of a call.
//   * large transfers are pipelined (`pipeline` below): the phases of a call run over chunks, phase
//     p of chunk c beside phase p - 1 of chunk c + 1, one barrier per step — so the local copy into
//     staging (or out of a landing zone) hides behind the NVLink traffic instead of adding to it.
#pragma once
#include <cstdlib>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

namespace pkbx {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 132;  // <= PKB_DEVCOMM_LSA_BARRIERS; one barrier per block

// ---- element packs -----------------------------------------------------------------------------

template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

template <typename T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f(float v) { return v; }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ float from_f(float v) { return v; }

// ---- peers and barriers ------------------------------------------------------------------------

/// Pack pointer into rank `peer`'s copy of the window at byte offset `off` (one NVLink domain:
/// LSA rank == world rank).
template <typename T>
__device__ __forceinline__ Pack<T>* peer_pack(ncclWindow_t win, size_t off, int peer) {
  return static_cast<Pack<T>*>(ncclGetLsaPointer(win, off, peer));
}

/// Block `blockIdx.x` meets the same block on every rank; writes before are visible after.
__device__ __forceinline__ void barrier(const ncclDevComm& dc) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), blockIdx.x);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__device__ __forceinline__ size_t first_index() { return size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return size_t(gridDim.x) * blockDim.x; }

struct AsIs {
  __device__ float operator()(float v) const { return v; }
};

/// Element-wise sum of the first w (<= N) packs, fp32 in index (= rank) order, one rounding to T:
/// every rank that sums the same packs gets the same bits. `f` maps each element's fp32 sum to the
/// value stored (default: the sum itself).
template <typename T, int N, class F = AsIs>
__device__ __forceinline__ Pack<T> sum_packs(const Pack<T> (&x)[N], int w = N, F f = {}) {
  Pack<T> y;
#pragma unroll
  for (int k = 0; k < Pack<T>::N; ++k) {
    float acc = 0.f;
#pragma unroll
    for (int p = 0; p < N; ++p)
      if (p < w) acc += to_f(x[p].v[k]);
    y.v[k] = from_f<T>(f(acc));
  }
  return y;
}

/// Sum of pack j over `W` ranks' buffers (all loads issued before the first add).
template <typename T, int W>
__device__ __forceinline__ Pack<T> sum_peers(ncclWindow_t win, size_t off, size_t j) {
  Pack<T> x[W];
#pragma unroll
  for (int p = 0; p < W; ++p) x[p] = peer_pack<T>(win, off, p)[j];
  return sum_packs<T, W>(x);
}

// ---- chunked pipelines --------------------------------------------------------------------------

/// Runs the P phases of an exchange over n packs, in chunks of `chunk` packs: in step i, phase p
/// works on chunk i - p, and one barrier ends every step but the last. So phase p of chunk c runs
/// after a barrier that follows phase p - 1 of chunk c on every rank — what it needs — while phase
/// p - 1 already works on chunk c + 1. One chunk gives the plain sequence phase 0, barrier,
/// phase 1, ... Indices are chunk-relative in the grid-stride loop, so pack j of every chunk is
/// handled by the same block on every rank (the per-block barrier convention above).
/// `f(p, j)` does phase p for pack j of the call.
template <int P, class F>
__device__ __forceinline__ void pipeline(const ncclDevComm& dc, size_t n, size_t chunk, const F& f) {
  const long chunks = static_cast<long>((n + chunk - 1) / chunk);
  const long steps = chunks + P - 1;
  for (long i = 0; i < steps; ++i) {
    for (size_t k = first_index(); k < chunk; k += grid_stride()) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const long c = i - p;
        if (c < 0 || c >= chunks) continue;
        const size_t j = static_cast<size_t>(c) * chunk + k;
        if (j < n) f(p, j);
      }
    }
    if (i + 1 < steps) barrier(dc);
  }
}

template <int P, class F>
__global__ void __launch_bounds__(kThreads) pipelined(ncclDevComm dc, size_t n, size_t chunk, F f) {
  pipeline<P>(dc, n, chunk, f);
}

// ---- host side ---------------------------------------------------------------------------------

/// Chunks for a pipelined exchange of `bytes` per phase: none below 16 MiB, else 16 MiB chunks, at
/// least 4 and at most 16 of them. Measured on 2 x H200 (all-gather, reduce-scatter, all-reduce;
/// 16, 64 and 256 MiB per phase): 4 chunks beat 1 by 4-5 % at 16 MiB; 32 chunks (2-8 MiB) lose to
/// 4 or 16 everywhere — each chunk costs every block a barrier round trip, and only the first
/// chunk's first phase and the last chunk's last phase stay exposed. PKBX_CHUNKS=<c> (the same on
/// every rank) overrides it, to measure the choice.
inline long pipeline_chunks(size_t bytes) {
  static const long forced = [] {
    const char* v = std::getenv("PKBX_CHUNKS");
    return v ? std::atol(v) : 0L;
  }();
  if (forced > 0) return forced;
  if (bytes < (16u << 20)) return 1;
  const long c = static_cast<long>(bytes >> 24);
  return c < 4 ? 4 : (c > 16 ? 16 : c);
}

/// Blocks for `packs` 16-byte packs per phase: about `per_thread` packs per thread, at most kMaxBlocks.
inline int blocks_for(size_t packs, int per_thread = 2) {
  size_t b = (packs + size_t(kThreads) * per_thread - 1) / (size_t(kThreads) * per_thread);
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : static_cast<int>(b));
}

/// Launches the P-phase exchange `f` over n packs per phase, pipelined in chunks (pipeline_chunks;
/// chunks are whole multiples of the grid's threads). One pack per thread sizes the grid: below
/// 1 MiB per phase every thread then does one pack per chunk and waits for one round trip instead
/// of two (2 x H200, 8 KiB - 512 KiB: eager 0.3-1.5 us and graph-replayed 0.1-1.7 us faster than
/// two packs per thread, e.g. all-reduce 32 KiB graph 6.0 -> 4.6 us).
template <int P, class F>
int launch_pipelined(pkb_context* ctx, size_t n, const F& f) {
  const int blocks = blocks_for(n, 1);
  const size_t step = static_cast<size_t>(blocks) * kThreads;
  const long c = pipeline_chunks(n * 16);
  size_t chunk = (n + c - 1) / c;
  chunk = (chunk + step - 1) / step * step;
  if (chunk >= n) chunk = n;
  pipelined<P><<<blocks, kThreads, 0, ctx->stream>>>(*ctx->devcomm, n, chunk, f);
  PKB_LAUNCH(ctx);
  return 0;
}

/// State common to the experts: one symmetric buffer (two halves, by call parity) and a call count.
struct Staging {
  pkb_symmetric buf{};
  size_t half = 0;    // bytes per parity half
  unsigned long long calls = 0;
  /// Byte offset of this call's half, advancing the call count.
  size_t next_half() { return (calls++ % 2) * half; }
  /// This rank's staging at byte offset `off`, as packs.
  template <typename T>
  Pack<T>* packs(size_t off) const {
    return reinterpret_cast<Pack<T>*>(static_cast<char*>(buf.local) + off);
  }
};

/// Allocates `half_bytes` x 2 of symmetric memory into ctx->user. Without one NVLink domain (ranks
/// on several hosts) it leaves ctx->user null and the expert's NCCL fallback does the work.
inline int staging_init(pkb_context* ctx, size_t half_bytes) {
  if (!ctx->topo.all_pairs_p2p) {
    ctx->user = nullptr;
    return 0;
  }
  Staging* s = new Staging{};
  s->half = (half_bytes + 255) / 256 * 256;
  if (ctx->symmetric_alloc(ctx, 2 * s->half, &s->buf) != 0) {
    delete s;
    return 1;
  }
  ctx->user = s;
  return 0;
}

inline int staging_finalize(pkb_context* ctx) {
  Staging* s = static_cast<Staging*>(ctx->user);
  int rc = s ? ctx->symmetric_free(ctx, &s->buf) : 0;
  delete s;
  ctx->user = nullptr;
  return rc;
}

/// Bytes of one element of the problem's M x N tensor.
inline size_t tensor_bytes(const pkb_context* ctx) {
  return static_cast<size_t>(ctx->param(ctx, "M", 0) * ctx->param(ctx, "N", 0)) * pkb_dtype_size(ctx->dtype);
}

/// Dispatches F<T, W> on the dtype and the world size (2, 4 or 8; other sizes return 2 = "no fast path").
template <template <typename, int> class F, typename... A>
int dispatch(pkb_dtype d, int world, A&&... args) {
#define PKBX_W(T)                                                     \
  switch (world) {                                                    \
    case 2: return F<T, 2>::run(static_cast<A&&>(args)...);           \
    case 4: return F<T, 4>::run(static_cast<A&&>(args)...);           \
    case 8: return F<T, 8>::run(static_cast<A&&>(args)...);           \
    default: return 2;                                                \
  }
  switch (d) {
    case PKB_BF16: PKBX_W(__nv_bfloat16)
    case PKB_FP16: PKBX_W(__half)
    case PKB_FP32: PKBX_W(float)
    default: return 2;
  }
#undef PKBX_W
}

}  // namespace pkbx
