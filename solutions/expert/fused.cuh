// Building blocks for the experts that fuse communication with compute (GEMM + collective, norms and
// losses over sharded rows): runtime world size up to 8, indexed LSA barriers, row-major cuBLAS GEMMs,
// a lazily allocated symmetric buffer, a side stream with fork/join events.
//
// Conventions on top of expert.cuh's:
//   * the world size is a run-time value (any W in 2..kMaxW): peer loops are unrolled to kMaxW and
//     predicated, so every load of a reduction is still issued before the first add;
//   * a kernel that synchronises with peers uses barrier indices [base, base + gridDim.x); kernels
//     that may run at the same time (different streams) use disjoint ranges — an index's epoch lives
//     in local memory and must not be used by two CTAs at once;
//   * every decision (variant, chunk count, grid) is a function of shapes, dtype and W only, so all
//     ranks take the same path, launch the same grids and meet the same barriers;
//   * buffers that peers read or write are double-buffered by call parity (see expert.cuh).
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "expert.cuh"

namespace pkbx {

constexpr int kMaxW = 8;

/// Block `blockIdx.x` meets the same block on every rank at LSA barrier `base + blockIdx.x`.
__device__ __forceinline__ void barrier_at(const ncclDevComm& dc, uint32_t base) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), base + blockIdx.x);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

template <typename T>
__device__ __forceinline__ T* lsa_ptr(ncclWindow_t win, size_t off, int peer) {
  return static_cast<T*>(ncclGetLsaPointer(win, off, peer));
}

/// Round through the storage type: what PyTorch does when an intermediate tensor has dtype T.
template <typename T>
__device__ __forceinline__ float rnd(float v) {
  return to_f(from_f<T>(v));
}

/// Sum of pack j over W (<= kMaxW) sources, fp32 in rank order (sum_packs, with its map `f`); all
/// loads issued before the first add.
template <typename T, class F = AsIs>
__device__ __forceinline__ Pack<T> sum_srcs(const Pack<T>* const (&src)[kMaxW], int W, size_t j, F f = {}) {
  Pack<T> x[kMaxW];
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W) x[p] = src[p][j];
  return sum_packs<T, kMaxW>(x, W, f);
}

__device__ __forceinline__ float warp_sum(float v, int width = 32) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    if (o < width) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v, int width = 32) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    if (o < width) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- host side ---------------------------------------------------------------------------------

inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

inline cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

/// Row-major C[m, n] = A[m, k] · B[k, n] (leading dimensions in elements), fp32 accumulation, one
/// rounding to the output type: the column-major product Cᵀ = Bᵀ·Aᵀ.
inline cublasStatus_t gemm_rm(cublasHandle_t h, pkb_dtype d, int m, int n, int k, const void* A, int lda, const void* B,
                              int ldb, void* C, int ldc) {
  const float one = 1.f, zero = 0.f;
  const cudaDataType_t t = cuda_type(d);
  return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, t, ldb, A, t, lda, &zero, C, t, ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/// Time model used to pick a chunk count (seconds). Conservative H200 rates: cuBLAS bf16 ~600 TFLOP/s
/// on mid-size GEMMs (fp32 ~45), NVLink ~300 GB/s per direction under contention, ~4 us per extra
/// pipeline stage (one more kernel on each stream plus an event hop).
inline double gemm_seconds(double m, double n, double k, pkb_dtype d) {
  return 2.0 * m * n * k / (d == PKB_FP32 ? 45e12 : 600e12);
}
constexpr double kLinkBytesPerSecond = 300e9;
constexpr double kStageSeconds = 4e-6;

/// Estimated time of a C-stage pipeline of GEMM (tg) and communication (tc), communication of stage
/// i overlapping the GEMM of stage i +- 1: one stage of the slower side is exposed.
inline double pipeline_seconds(double tg, double tc, int C) {
  return (tg + tc) / C + std::max(tg, tc) * (C - 1) / C + (C - 1) * kStageSeconds;
}

/// PKBX_STAGES=<n> in the environment (the same on every rank) overrides the time model's stage
/// count, for tuning on a machine; unset or 0: the model decides.
inline int stages_override() {
  const char* v = std::getenv("PKBX_STAGES");
  int n = v ? std::atoi(v) : 0;
  return n < 0 ? 0 : std::min(n, 8);
}

/// Best stage count in {1, 2, 4, 8} for `rows` rows, each stage at least `min_rows` rows.
inline int pick_stages(double tg, double tc, long long rows, long long min_rows) {
  if (int n = stages_override()) return static_cast<int>(std::min<long long>(n, std::max<long long>(1, rows / 64)));
  int best = 1;
  double best_t = pipeline_seconds(tg, tc, 1);
  for (int C = 2; C <= 8; C *= 2) {
    if (rows / C < min_rows) break;
    double t = pipeline_seconds(tg, tc, C);
    if (t < best_t * 0.97) best = C, best_t = t;
  }
  return best;
}

/// Rows [begin, end) of stage i of C over `rows` rows, stage boundaries on multiples of `align`.
inline void stage_rows(long long rows, int C, int i, long long align, long long* begin, long long* end) {
  long long per = static_cast<long long>(round_up(static_cast<size_t>((rows + C - 1) / C), static_cast<size_t>(align)));
  *begin = std::min(rows, per * i);
  *end = std::min(rows, per * (i + 1));
}

/// A side stream (highest priority, so that communication kernels get SMs ahead of queued GEMM
/// tiles) and events to fork from and join into ctx->stream.
struct SideStream {
  static constexpr int kEvents = 10;
  cudaStream_t s = nullptr;
  cudaEvent_t ev[kEvents] = {};
  int create() {
    int lo = 0, hi = 0;
    if (cudaDeviceGetStreamPriorityRange(&lo, &hi) != cudaSuccess) return 1;
    if (cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi) != cudaSuccess) return 1;
    for (auto& e : ev)
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return 1;
    return 0;
  }
  /// Waits for what the stream holds, then frees it and the events.
  void destroy() {
    if (s) cudaStreamSynchronize(s);
    for (auto& e : ev)
      if (e) cudaEventDestroy(e), e = nullptr;
    if (s) cudaStreamDestroy(s), s = nullptr;
  }
};

/// Makes `to` wait for everything enqueued so far on `from`, through event `e`.
inline cudaError_t stream_after(cudaStream_t to, cudaStream_t from, cudaEvent_t e) {
  cudaError_t r = cudaEventRecord(e, from);
  return r != cudaSuccess ? r : cudaStreamWaitEvent(to, e, 0);
}

/// One symmetric buffer, allocated on the first call (shapes are known there; the first call is
/// untimed) and never again: every later call needs the same bytes, since shapes are fixed per job.
struct LazySymmetric {
  pkb_symmetric buf{};
  size_t bytes = 0;
  int ensure(pkb_context* ctx, size_t need) {
    if (bytes >= need) return 0;
    if (bytes != 0) {
      ctx->set_error(ctx, "symmetric buffer size changed between calls (shapes must be fixed per job)");
      return 1;
    }
    need = round_up(need, 1u << 21);
    if (ctx->symmetric_alloc(ctx, need, &buf) != 0) return 1;
    bytes = need;
    return 0;
  }
  int release(pkb_context* ctx) {
    int rc = bytes ? ctx->symmetric_free(ctx, &buf) : 0;
    bytes = 0;
    return rc;
  }
  char* local(size_t off) const { return static_cast<char*>(buf.local) + off; }
};

/// Dispatches F<T>::run on a floating dtype; returns 2 ("no fast path") for the others.
template <template <typename> class F, typename... A>
int dispatch_t(pkb_dtype d, A&&... args) {
  switch (d) {
    case PKB_BF16: return F<__nv_bfloat16>::run(static_cast<A&&>(args)...);
    case PKB_FP16: return F<__half>::run(static_cast<A&&>(args)...);
    case PKB_FP32: return F<float>::run(static_cast<A&&>(args)...);
    default: return 2;
  }
}

/// The three entry points of a fused expert. `State` (default-constructed at pkb_init) reads each
/// call's sizes in `shape(in, out)` and frees all it holds in `int release(ctx)`; `Run<T>::run(ctx,
/// state, in, out)` is the call for element type T (0 ok, 1 failed with ctx->set_error, 2 no path).
template <class State, template <typename> class Run>
struct Expert {
  static int init(pkb_context* ctx) {
    ctx->user = new State{};
    return 0;
  }
  static int run(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
    State* st = static_cast<State*>(ctx->user);
    st->shape(in, out);
    int rc = dispatch_t<Run>(in[0].dtype, ctx, st, in, out);
    if (rc == 2) ctx->set_error(ctx, "unsupported dtype");
    return rc == 0 ? 0 : 1;
  }
  static int finalize(pkb_context* ctx) {
    State* st = static_cast<State*>(ctx->user);
    if (!st) return 0;
    int rc = st->release(ctx);
    delete st;
    ctx->user = nullptr;
    return rc;
  }
};

}  // namespace pkbx
