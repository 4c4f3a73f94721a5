// Expert solution for problem 8 (all-to-all, equal splits).
//
// Variants:
//   push  every size: each rank stores slice q of its input straight into rank q's landing zone
//         (slot = sender's rank) and its own slice into its output, one barrier, each rank copies
//         the W-1 landed slices into its output. (W-1) S bytes out per rank: the minimum. Large
//         inputs are pipelined in chunks (expert.cuh `pipeline`): the copy-out of chunk c runs
//         beside the stores of chunk c + 1.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// Phase 0: slice q of the input stored into rank q's landing zone (slot = this rank), this rank's
/// own slice into its output. Phase 1: the W-1 landed slices copied into the output.
template <typename T, int W>
struct PushCopy {
  ncclWindow_t win;
  size_t off;
  const Pack<T>* land;
  const Pack<T>* in;
  Pack<T>* out;
  size_t n;
  int rank;
  __device__ void operator()(int phase, size_t j) const {
    Pack<T> x[W];
    if (phase == 0) {
#pragma unroll
      for (int q = 0; q < W; ++q) x[q] = in[q * n + j];
#pragma unroll
      for (int q = 0; q < W; ++q) {
        if (q == rank) out[rank * n + j] = x[q];
        else peer_pack<T>(win, off, q)[rank * n + j] = x[q];
      }
      return;
    }
#pragma unroll
    for (int p = 0; p < W; ++p)
      if (p != rank) x[p] = land[p * n + j];
#pragma unroll
    for (int p = 0; p < W; ++p)
      if (p != rank) out[p * n + j] = x[p];
  }
};

template <typename T, int W>
struct AllToAll {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T) / W;  // one slice
    if (bytes % 16 != 0 || W * bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    PushCopy<T, W> f{st->buf.window, off, st->packs<T>(off), static_cast<const Pack<T>*>(in.data),
                     static_cast<Pack<T>*>(out.data), n, ctx->rank};
    return launch_pipelined<2>(ctx, n, f);
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, ctx->world * tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<AllToAll>(in[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  size_t n = pkb_numel(&in[0]) / ctx->world;
  size_t bytes = n * pkb_dtype_size(in[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(in[0].dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(in[0].data) + r * bytes, n, t, r, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(out[0].data) + r * bytes, n, t, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
