// Expert solution for problem 3 (broadcast from the root).
//
// Variants:
//   one-shot     S <= 256 KiB, or W = 2: the root stages its input, one barrier, every other rank
//                pulls all of it. The root's link carries (W-1) S.
//   split-pull   larger S: the root stages its input, barrier, rank r pulls slice r from the root
//                and republishes it, barrier, every rank pulls each slice from the rank that holds
//                it. The root's link carries 2 (W-1)/W S (1.5 S at W = 4 instead of 3 S).
//   Both are pipelined in chunks for large S (expert.cuh `pipeline`): the root's copy-in of chunk
//   c + 1 runs beside the pulls of chunk c. (Without that, NCCL's pipelined broadcast won above
//   16 MiB: 0.95x at 32 MiB, W=2.)
//   NCCL         W not in {2, 4, 8}, or S does not split into 16-byte packs per slice.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// One-shot. Phase 0 (root): the input into staging and its output. Phase 1 (others): all of it
/// pulled from the root's staging.
template <typename T, int W>
struct OneShot {
  ncclWindow_t win;
  size_t off;
  Pack<T>* mine;
  const Pack<T>* in;
  Pack<T>* out;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0 && rank == root) {
      Pack<T> x = in[j];
      mine[j] = x;
      out[j] = x;
    } else if (phase == 1 && rank != root) {
      out[j] = peer_pack<T>(win, off, root)[j];
    }
  }
};

/// Split-pull over slices j of every one of the W slices. Phase 0 (root): the input into staging and
/// its output. Phase 1 (others): slice `rank` pulled from the root and republished in own staging.
/// Phase 2 (others): each other slice pulled from the rank that holds it (the root holds them all).
template <typename T, int W>
struct SplitPull {
  ncclWindow_t win;
  size_t off;
  Pack<T>* mine;
  const Pack<T>* in;
  Pack<T>* out;
  size_t slice;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0) {
      if (rank != root) return;
#pragma unroll
      for (int s = 0; s < W; ++s) {
        Pack<T> x = in[s * slice + j];
        mine[s * slice + j] = x;
        out[s * slice + j] = x;
      }
    } else if (rank != root) {
      if (phase == 1) {
        Pack<T> x = peer_pack<T>(win, off, root)[rank * slice + j];
        mine[rank * slice + j] = x;
        out[rank * slice + j] = x;
        return;
      }
      Pack<T> x[W];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) x[s] = peer_pack<T>(win, off, s)[s * slice + j];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) out[s * slice + j] = x[s];
    }
  }
};

template <typename T, int W>
struct Broadcast {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T);
    if (bytes % (16 * W) != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    int root = static_cast<int>(ctx->param(ctx, "root", 0));
    auto* src = static_cast<const Pack<T>*>(in.data);
    auto* dst = static_cast<Pack<T>*>(out.data);
    if (W == 2 || bytes <= (256u << 10))
      return launch_pipelined<2>(ctx, n, OneShot<T, W>{st->buf.window, off, st->packs<T>(off), src, dst, ctx->rank, root});
    return launch_pipelined<3>(ctx, n / W,
                               SplitPull<T, W>{st->buf.window, off, st->packs<T>(off), src, dst, n / W, ctx->rank, root});
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<Broadcast>(in[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  PKB_NCCL(ctx, ncclBroadcast(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype),
                              static_cast<int>(ctx->param(ctx, "root", 0)), ctx->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
