// Expert solution for problem 7 (reduce-scatter, sum).
//
// Variants:
//   push  every size: each rank stores chunk q of its input straight into rank q's landing zone
//         (slot = sender's rank) over NVLink, one barrier, each rank sums its W slots in fp32 in rank
//         order (its own chunk read from its input). (W-1) S bytes out per rank: the minimum; remote
//         stores saturate the link with few SMs. Large inputs are pipelined in chunks (expert.cuh
//         `pipeline`): the sums of chunk c run beside the stores of chunk c + 1.
//   NCCL  W not in {2, 4, 8}, or S not a multiple of 16 bytes.
#include "expert.cuh"

using namespace pkbx;

namespace {

/// Phase 0: chunk q of the input stored into rank q's landing zone, slot = this rank. Phase 1: the W
/// slots summed in fp32 in rank order (this rank's own chunk read from its input).
template <typename T, int W>
struct PushReduce {
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
      for (int q = 0; q < W; ++q)
        if (q != rank) x[q] = in[q * n + j];
#pragma unroll
      for (int q = 0; q < W; ++q)
        if (q != rank) peer_pack<T>(win, off, q)[rank * n + j] = x[q];
      return;
    }
#pragma unroll
    for (int p = 0; p < W; ++p) x[p] = p == rank ? in[rank * n + j] : land[p * n + j];
    const Pack<T> y = sum_packs<T, W>(x);
    out[j] = y;
  }
};

template <typename T, int W>
struct ReduceScatter {
  static int run(pkb_context* ctx, const pkb_tensor& in, pkb_tensor& out) {
    Staging* st = static_cast<Staging*>(ctx->user);
    size_t bytes = static_cast<size_t>(pkb_numel(&out)) * sizeof(T);
    if (bytes % 16 != 0 || W * bytes > st->half) return 2;
    size_t n = bytes / 16;
    size_t off = st->next_half();
    PushReduce<T, W> f{st->buf.window, off, st->packs<T>(off), static_cast<const Pack<T>*>(in.data),
                       static_cast<Pack<T>*>(out.data), n, ctx->rank};
    return launch_pipelined<2>(ctx, n, f);
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return staging_init(ctx, ctx->world * tensor_bytes(ctx)); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rc = !ctx->user ? 2 : dispatch<ReduceScatter>(out[0].dtype, ctx->world, ctx, in[0], out[0]);
  if (rc != 2) return rc;
  PKB_NCCL(ctx, ncclReduceScatter(in[0].data, out[0].data, pkb_numel(&out[0]), pkb_nccl_dtype(out[0].dtype), ncclSum,
                                  ctx->comm, ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) { return staging_finalize(ctx); }
