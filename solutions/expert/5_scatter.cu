// Expert solution for problem 5 (scatter from the root).
//
// Variants:
//   push  every size: the root stores chunk q straight into rank q's staging half over NVLink
//         (remote stores need few SMs and never wait on a round trip), one barrier, each rank
//         copies its chunk out of staging. The root's link carries (W-1) S: the minimum. Large
//         inputs are pipelined in chunks (expert.cuh `pipeline`): the copy-out of chunk c runs
//         beside the stores of chunk c + 1.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// Phase 0 (root): chunk q of the input stored into rank q's staging, its own chunk into its output.
/// Phase 1 (others): the landed chunk copied into the output.
template <typename T, int W>
struct PushCopy {
  ncclWindow_t win;
  size_t off;
  const Pack<T>* land;
  const Pack<T>* in;
  Pack<T>* out;
  size_t n;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0 && rank == root) {
      Pack<T> x[W];
#pragma unroll
      for (int q = 0; q < W; ++q) x[q] = in[q * n + j];
#pragma unroll
      for (int q = 0; q < W; ++q) {
        if (q == rank) out[j] = x[q];
        else peer_pack<T>(win, off, q)[j] = x[q];
      }
    } else if (phase == 1 && rank != root) {
      out[j] = land[j];
    }
  }
};

template <typename T, int W>
struct Scatter {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&out)) * sizeof(T);
    if (bytes % 16 != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    PushCopy<T, W> f{st->buf.window, off, st->packs<T>(off), static_cast<const Pack<T>*>(in.data),
                     static_cast<Pack<T>*>(out.data), n, ctx->rank, static_cast<int>(ctx->param(ctx, "root", 0))};
    return launch_pipelined<2>(ctx, n, f);
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<Scatter>(out[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  size_t n = pkb_numel(&out[0]);
  size_t bytes = n * pkb_dtype_size(out[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(out[0].dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  if (ctx->rank == root) {
    for (int r = 0; r < ctx->world; ++r) {
      const char* chunk = static_cast<const char*>(in[0].data) + r * bytes;
      if (r == root) PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, chunk, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
      else PKB_NCCL(ctx, ncclSend(chunk, n, t, r, ctx->comm, ctx->stream));
    }
  } else {
    PKB_NCCL(ctx, ncclRecv(out[0].data, n, t, root, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
