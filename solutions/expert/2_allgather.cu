// Expert solution for problem 2 (all-gather).
//
// Variants:
//   pull  every size: each rank copies its input into this call's staging half (and its own output
//         slot), one barrier, then pulls the W-1 other shards straight into its output — (W-1) S
//         bytes in per rank (the minimum), one barrier, no extra local copy of the W S output.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

template <typename T, int W>
__global__ void __launch_bounds__(kThreads) gather_pull(ncclDevComm dc, ncclWindow_t win, size_t off, const Pack<T>* in,
                                                        Pack<T>* out, size_t n, int rank) {
  Pack<T>* mine = static_cast<Pack<T>*>(ncclGetLocalPointer(win, off));
  for (size_t j = first_index(); j < n; j += grid_stride()) {
    Pack<T> x = in[j];
    mine[j] = x;
    out[rank * n + j] = x;
  }
  barrier(dc);
  for (size_t j = first_index(); j < n; j += grid_stride()) {
    Pack<T> x[W];
#pragma unroll
    for (int s = 0; s < W; ++s)
      if (s != rank) x[s] = peer_pack<T>(win, off, s)[j];
#pragma unroll
    for (int s = 0; s < W; ++s)
      if (s != rank) out[s * n + j] = x[s];
  }
}

template <typename T, int W>
struct AllGather {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T);
    if (bytes % 16 != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    gather_pull<T, W><<<blocks_for(n), kThreads, 0, ctx->stream>>>(*ctx->devcomm, st->buf.window, off,
                                                                    static_cast<const Pack<T>*>(in.data),
                                                                    static_cast<Pack<T>*>(out.data), n, ctx->rank);
    PKB_LAUNCH(ctx);
    return 0;
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<AllGather>(in[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  PKB_NCCL(ctx, ncclAllGather(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ctx->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
