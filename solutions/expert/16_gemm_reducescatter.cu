// Expert solution for problem 16 (GEMM, then reduce-scatter of the product by row blocks: rank r
// returns rows [r M/W, (r+1) M/W) of sum_r A_r B_r; Megatron's row-parallel linear with sequence
// parallelism).
//
// Numerics as the baseline: each partial row block is a full-K_local cuBLAS GEMM (fp32 accumulation)
// rounded once to D, like the baseline's product; the W partial blocks are added in fp32 in rank
// order and rounded once (NCCL adds in D with a rounding per hop).
//
// Variants (a function of M, N, K, W and the dtype only):
//   pull       small products: one GEMM of all M rows into this call's half of a symmetric buffer,
//              then one kernel: barrier (a peer's reduction starts after its GEMM, so one barrier
//              proves its whole product is there), pull row block `rank` from every rank, sum.
//              (W-1)/W S in per rank, two launches, one barrier.
//   pipelined  larger products: the GEMM is split by destination row block, computed in the order
//              rank+1, rank+2, ..., rank (own block last); as soon as block q is done the copy
//              engines write it into rank q's landing zone (slot = this rank; one cudaMemcpyAsync
//              into the peer's mapping of the symmetric buffer, on a high-priority side stream),
//              while ctx->stream computes the next block. After the own block, one kernel meets
//              every peer (a peer's final kernel starts after its copies have completed, so one
//              barrier proves every slot landed) and sums the W slots (own block read locally).
//              Every copy but the first overlaps a GEMM, and the copies take no SMs from it (an
//              earlier version pushed with 32 CTAs of SM stores: 1.39x of max(GEMM only, link
//              floor) at the large size, against this one's figure in docs/results/compute-comm.md).
//              The time model (GEMM ~600 TFLOP/s, link ~300 GB/s, ~4 us per extra stage) picks it
//              when that pays (PKBX_STAGES=1 forces the pull variant, >1 this one).
//   NCCL       N x e not a multiple of 16 bytes, M not divisible by W, or no load/store peers:
//              cuBLAS + ncclReduceScatter.
// Buffer reuse: whatever peers read or write (the pull variant's products, the landing zones) is
// double-buffered by call parity; the final barrier of call k-1 proves every peer finished call
// k-2, the last user of the half written in call k. The pipelined variant's own products are local
// and fully consumed (pushed) before the call returns.
#include "fused.cuh"

using namespace pkbx;

namespace {

constexpr int kRsThreads = 512;

template <typename T>
__global__ void __launch_bounds__(kRsThreads)
    rs_pull(ncclDevComm dc, ncclWindow_t win, size_t off, Pack<T>* __restrict__ out, size_t base, size_t n, int W) {
  barrier_at(dc, 0);
  const Pack<T>* src[kMaxW];
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W) src[p] = lsa_ptr<const Pack<T>>(win, off, p) + base;
  for (size_t j = first_index(); j < n; j += grid_stride()) out[j] = sum_srcs<T>(src, W, j);
}

template <typename T>
__global__ void __launch_bounds__(kRsThreads)
    rs_final(ncclDevComm dc, ncclWindow_t win, size_t off, const Pack<T>* __restrict__ own, Pack<T>* __restrict__ out,
             size_t n, int W, int rank) {
  barrier_at(dc, 0);  // a peer's final kernel starts after all its pushes: every slot has landed
  const Pack<T>* land = static_cast<const Pack<T>*>(ncclGetLocalPointer(win, off));
  const Pack<T>* src[kMaxW];
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W) src[p] = p == rank ? own : land + p * n;
  for (size_t j = first_index(); j < n; j += grid_stride()) out[j] = sum_srcs<T>(src, W, j);
}

struct State {
  LazySymmetric sym;
  SideStream side;
  void* scratch = nullptr;  // NCCL path: the M x N product
  bool decided = false, fast = false, pipelined = false;
  int M = 0, N = 0, K = 0;
  size_t p_bytes = 0, half = 0;
  unsigned long long calls = 0;

  void shape(const pkb_tensor* in, const pkb_tensor*) {
    M = static_cast<int>(in[0].shape[0]);
    K = static_cast<int>(in[0].shape[1]);
    N = static_cast<int>(in[1].shape[1]);
  }
  int release(pkb_context* ctx) {
    side.destroy();
    if (scratch) cudaFree(scratch), scratch = nullptr;
    return sym.release(ctx);
  }
};

template <typename T>
struct GemmRs {
  static int run(pkb_context* ctx, State* st, const pkb_tensor* in, pkb_tensor* out) {
    const int W = ctx->world, M = st->M, N = st->N, K = st->K, rank = ctx->rank;
    const size_t e = sizeof(T);
    const int Mb = M / W;
    if (!st->decided) {
      st->decided = true;
      st->fast = ctx->topo.all_pairs_p2p && W <= kMaxW && M % W == 0 && (static_cast<size_t>(N) * e) % 16 == 0 &&
                 pkb_numel(&out[0]) == static_cast<int64_t>(Mb) * N;
      if (st->fast) {
        const double S = static_cast<double>(M) * N * e;
        const double tg = gemm_seconds(M, N, K, ctx->dtype), tc = (W - 1.0) / W * S / kLinkBytesPerSecond;
        st->pipelined = Mb >= 128 && pipeline_seconds(tg, tc, W) < 0.97 * pipeline_seconds(tg, tc, 1);
        if (int o = stages_override()) st->pipelined = o > 1;
        st->p_bytes = round_up(static_cast<size_t>(M) * N * e, 256);
        // pull: [P half 0][P half 1]; pipelined: [P][L half 0][L half 1] (L: W slots of Mb x N = M x N)
        st->half = st->p_bytes;
        if (st->sym.ensure(ctx, (st->pipelined ? 3 : 2) * st->p_bytes) != 0) return 1;
        if (st->pipelined && st->side.create() != 0) {
          ctx->set_error(ctx, "cannot create the side stream");
          return 1;
        }
      }
    }
    const T* A = static_cast<const T*>(in[0].data);
    const T* B = static_cast<const T*>(in[1].data);
    T* Cout = static_cast<T*>(out[0].data);
    const pkb_dtype d = in[0].dtype;
    if (!st->fast) {
      if (!st->scratch) PKB_CUDA(ctx, cudaMalloc(&st->scratch, static_cast<size_t>(M) * N * e));
      T* P = static_cast<T*>(st->scratch);
      PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, M, N, K, A, K, B, N, P, N));
      PKB_NCCL(ctx, ncclReduceScatter(P, Cout, static_cast<size_t>(Mb) * N, pkb_nccl_dtype(d), ncclSum, ctx->comm, ctx->stream));
      return 0;
    }
    const size_t n = static_cast<size_t>(Mb) * N * e / 16;  // packs per row block
    auto* o = reinterpret_cast<Pack<T>*>(Cout);
    if (!st->pipelined) {
      const size_t off = (st->calls++ % 2) * st->half;
      T* P = reinterpret_cast<T*>(st->sym.local(off));
      PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, M, N, K, A, K, B, N, P, N));
      rs_pull<T><<<blocks_for(n), kRsThreads, 0, ctx->stream>>>(*ctx->devcomm, st->sym.buf.window, off, o, rank * n, n, W);
      PKB_LAUNCH(ctx);
      return 0;
    }
    const size_t off_l = st->p_bytes + (st->calls++ % 2) * st->p_bytes;
    T* P = reinterpret_cast<T*>(st->sym.local(0));
    for (int i = 0; i < W; ++i) {
      const int q = (rank + 1 + i) % W;
      T* Pq = P + static_cast<size_t>(q) * Mb * N;
      PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, Mb, N, K, A + static_cast<size_t>(q) * Mb * K, K, B, N, Pq, N));
      if (q == rank) continue;
      PKB_CUDA(ctx, stream_after(st->side.s, ctx->stream, st->side.ev[i]));
      char* slot = static_cast<char*>(st->sym.buf.peers[q]) + off_l + static_cast<size_t>(rank) * n * 16;
      PKB_CUDA(ctx, cudaMemcpyAsync(slot, Pq, n * 16, cudaMemcpyDeviceToDevice, st->side.s));
    }
    PKB_CUDA(ctx, stream_after(ctx->stream, st->side.s, st->side.ev[W]));
    rs_final<T><<<blocks_for(n), kRsThreads, 0, ctx->stream>>>(*ctx->devcomm, st->sym.buf.window, off_l,
                                                               reinterpret_cast<const Pack<T>*>(P + static_cast<size_t>(rank) * Mb * N),
                                                               o, n, W, rank);
    PKB_LAUNCH(ctx);
    return 0;
  }
};

}  // namespace

using Entry = Expert<State, GemmRs>;

extern "C" int pkb_init(pkb_context* ctx) { return Entry::init(ctx); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) { return Entry::run(ctx, in, out); }

extern "C" int pkb_finalize(pkb_context* ctx) { return Entry::finalize(ctx); }
