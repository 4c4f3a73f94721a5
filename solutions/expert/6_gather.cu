// Expert solution for problem 6 (gather to the root; non-root ranks return their input, as PKB).
//
// Variants:
//   pull  every size: each rank stages its input (and non-roots copy it to their output), one
//         barrier, the root pulls the W-1 shards straight into its W x S output. The root's link
//         carries (W-1) S: the minimum; no extra copy of the W S output at the root. Large inputs
//         are pipelined in chunks (expert.cuh `pipeline`): the root pulls chunk c while the peers
//         stage chunk c + 1.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// Phase 0: the input into the output (the root: its own slot) and, off the root, into staging.
/// Phase 1 (root): the W-1 shards pulled from the peers' staging straight into the output.
template <typename T, int W>
struct StagePull {
  ncclWindow_t win;
  size_t off;
  Pack<T>* mine;
  const Pack<T>* in;
  Pack<T>* out;
  size_t n;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0) {
      Pack<T> x = in[j];
      if (rank == root) {
        out[rank * n + j] = x;
      } else {
        mine[j] = x;
        out[j] = x;
      }
    } else if (rank == root) {
      Pack<T> x[W];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) x[s] = peer_pack<T>(win, off, s)[j];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) out[s * n + j] = x[s];
    }
  }
};

template <typename T, int W>
struct Gather {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T);
    if (bytes % 16 != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    StagePull<T, W> f{st->buf.window, off, st->packs<T>(off), static_cast<const Pack<T>*>(in.data),
                      static_cast<Pack<T>*>(out.data), n, ctx->rank, static_cast<int>(ctx->param(ctx, "root", 0))};
    return launch_pipelined<2>(ctx, n, f);
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<Gather>(in[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  size_t n = pkb_numel(&in[0]);
  size_t bytes = n * pkb_dtype_size(in[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(in[0].dtype);
  if (ctx->rank != root) PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  PKB_NCCL(ctx, ncclGroupStart());
  if (ctx->rank == root) {
    for (int r = 0; r < ctx->world; ++r) {
      char* slot = static_cast<char*>(out[0].data) + r * bytes;
      if (r == root) PKB_CUDA(ctx, cudaMemcpyAsync(slot, in[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
      else PKB_NCCL(ctx, ncclRecv(slot, n, t, r, ctx->comm, ctx->stream));
    }
  } else {
    PKB_NCCL(ctx, ncclSend(in[0].data, n, t, root, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
