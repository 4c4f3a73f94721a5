// Expert solution for problem 5 (scatter from the root).
//
// Variants:
//   push  every size: the root stores chunk q straight into rank q's staging half over NVLink
//         (remote stores need few SMs and never wait on a round trip), one barrier, each rank
//         copies its chunk out of staging. The root's link carries (W-1) S: the minimum.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

template <typename T, int W>
__global__ void __launch_bounds__(kThreads) scatter_push(ncclDevComm dc, ncclWindow_t win, size_t off, const Pack<T>* in,
                                                         Pack<T>* out, size_t n, int rank, int root) {
  if (rank == root)
    for (size_t j = first_index(); j < n; j += grid_stride()) {
      Pack<T> x[W];
#pragma unroll
      for (int q = 0; q < W; ++q) x[q] = in[q * n + j];
#pragma unroll
      for (int q = 0; q < W; ++q) {
        if (q == rank) out[j] = x[q];
        else peer_pack<T>(win, off, q)[j] = x[q];
      }
    }
  barrier(dc);
  if (rank != root) {
    const Pack<T>* mine = static_cast<const Pack<T>*>(ncclGetLocalPointer(win, off));
    for (size_t j = first_index(); j < n; j += grid_stride()) out[j] = mine[j];
  }
}

template <typename T, int W>
struct Scatter {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&out)) * sizeof(T);
    if (bytes % 16 != 0 || bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    scatter_push<T, W><<<blocks_for(n), kThreads, 0, ctx->stream>>>(*ctx->devcomm, st->buf.window, off,
                                                                     static_cast<const Pack<T>*>(in.data),
                                                                     static_cast<Pack<T>*>(out.data), n, ctx->rank,
                                                                     static_cast<int>(ctx->param(ctx, "root", 0)));
    PKB_LAUNCH(ctx);
    return 0;
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
