// Expert solution for problem 4 (reduce to the root; non-root ranks return their input, as PKB).
//
// Variants:
//   one-shot           S <= 256 KiB, or W = 2: every rank stages its input, one barrier, the root
//                      pulls all W copies and sums them in fp32. The root's link carries (W-1) S.
//   reduce-then-gather larger S: stage, barrier, rank r reduces slice r pulling from every peer and
//                      publishes it, barrier, the root pulls the W-1 reduced slices. The root's link
//                      carries 2 (W-1)/W S.
//   Both are pipelined in chunks for large S (expert.cuh `pipeline`): the copy-in of chunk c + 1
//   runs beside the pulls of chunk c.
//   NCCL               W not in {2, 4, 8}, or S does not split into 16-byte packs per slice.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// One-shot. Phase 0: the input into staging (off the root also into the output, which PKB leaves
/// holding the input). Phase 1 (root): all W copies pulled and summed in fp32, in rank order.
template <typename T, int W>
struct OneShot {
  ncclWindow_t win;
  size_t off;
  Pack<T>* mine;
  const Pack<T>* in;
  Pack<T>* out;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0) {
      Pack<T> x = in[j];
      mine[j] = x;
      if (rank != root) out[j] = x;
    } else if (rank == root) {
      out[j] = sum_peers<T, W>(win, off, j);
    }
  }
};

/// Reduce-then-gather over slices j of the W slices. Phase 0: the input into staging (and into the
/// output off the root). Phase 1: slice `rank` summed over every rank's staging — into the root's
/// output, or published in own result area. Phase 2 (root): the W-1 other reduced slices pulled.
template <typename T, int W>
struct ReduceGather {
  ncclWindow_t win;
  size_t off, result_off;
  Pack<T>* stage;
  Pack<T>* result;
  const Pack<T>* in;
  Pack<T>* out;
  size_t slice;
  int rank, root;
  __device__ void operator()(int phase, size_t j) const {
    if (phase == 0) {
#pragma unroll
      for (int s = 0; s < W; ++s) {
        Pack<T> x = in[s * slice + j];
        stage[s * slice + j] = x;
        if (rank != root) out[s * slice + j] = x;
      }
    } else if (phase == 1) {
      Pack<T> y = sum_peers<T, W>(win, off, rank * slice + j);
      if (rank == root) out[rank * slice + j] = y;
      else result[rank * slice + j] = y;
    } else if (rank == root) {
      Pack<T> x[W];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) x[s] = peer_pack<T>(win, result_off, s)[s * slice + j];
#pragma unroll
      for (int s = 0; s < W; ++s)
        if (s != rank) out[s * slice + j] = x[s];
    }
  }
};

template <typename T, int W>
struct Reduce {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&in)) * sizeof(T);
    if (bytes % (16 * W) != 0 || 2 * bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    int root = static_cast<int>(ctx->param(ctx, "root", 0));
    auto* src = static_cast<const Pack<T>*>(in.data);
    auto* dst = static_cast<Pack<T>*>(out.data);
    if (W == 2 || bytes <= (256u << 10))
      return launch_pipelined<2>(ctx, n, OneShot<T, W>{st->buf.window, off, st->packs<T>(off), src, dst, ctx->rank, root});
    const size_t result_off = off + bytes;
    return launch_pipelined<3>(ctx, n / W,
                               ReduceGather<T, W>{st->buf.window, off, result_off, st->packs<T>(off),
                                                  st->packs<T>(result_off), src, dst, n / W, ctx->rank, root});
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, 2 * tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<Reduce>(in[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  size_t n = pkb_numel(&in[0]);
  if (ctx->rank != root)
    PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, in[0].data, n * pkb_dtype_size(in[0].dtype), cudaMemcpyDeviceToDevice, ctx->stream));
  PKB_NCCL(ctx, ncclReduce(in[0].data, out[0].data, n, pkb_nccl_dtype(in[0].dtype), ncclSum, root, ctx->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
