// Expert solution for problem 2 (all-gather).
//
// Variants:
//   pull  every size: each rank copies its input into this call's staging half (and its own output
//         slot), one barrier, then pulls the W-1 other shards straight into its output — (W-1) S
//         bytes in per rank (the minimum), no extra local copy of the W S output. Large inputs are
//         pipelined in chunks (expert.cuh `pipeline`): the copy-in of chunk c + 1 runs beside the
//         pulls of chunk c, one barrier per chunk.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// Phase 0: this rank's input into its staging half and its own output slot. Phase 1: the W-1 other
/// shards pulled from the peers' staging straight into the output.
template <typename T, int W>
struct GatherPull {
  ncclWindow_t win;
  size_t off;
  Pack<T>* mine;
  const Pack<T>* in;
  Pack<T>* out;
  size_t n;
  int rank;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0) {
      Pack<T> x = in[j];
      mine[j] = x;
      out[rank * n + j] = x;
      return;
    }
    Pack<T> x[W];
#pragma unroll
    for (int s = 0; s < W; ++s)
      if (s != rank) x[s] = peer_pack<T>(win, off, s)[j];
#pragma unroll
    for (int s = 0; s < W; ++s)
      if (s != rank) out[s * n + j] = x[s];
  }
};

template <typename T, int W>
struct AllGather {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T);
    if (bytes % 16 != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    GatherPull<T, W> f{st->buf.window, off, st->packs<T>(off), static_cast<const Pack<T>*>(in.data),
                       static_cast<Pack<T>*>(out.data), n, ctx->rank};
    return launch_pipelined<2>(ctx, n, f);
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
