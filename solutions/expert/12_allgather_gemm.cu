// Expert solution for problem 12 (all-gather of the K-shards of A, then GEMM: C = [A_0 | ... |
// A_{W-1}] B on every rank, with B rank-specific as in PKB).
//
// Numerics as the baseline: every output row is one full-K cuBLAS GEMM row (fp32 accumulation, one
// rounding to D); only the way A_global is assembled changes.
//
// Variants (a function of M, N, K, W and the dtype only):
//   single     small GEMMs (PKB's default shapes): one kernel stores this rank's shard into its
//              column range of A_global on every rank (remote stores into the peers' copies of a
//              symmetric buffer, its own copy locally), meets its peers (a rank's kernel ends only
//              after every peer's stores into it have landed), then one cuBLAS GEMM on A_global.
//              (W-1) M K/W e bytes out per rank (the all-gather minimum), two launches, one barrier;
//              replaces NCCL's all-gather, a concatenation kernel and the GEMM.
//   pipelined  larger GEMMs: M is cut into C chunks. On a high-priority side stream the copy engines
//              write chunk i of this rank's shard into its column range of every rank's A_global
//              (one strided cudaMemcpy2DAsync per rank, into the peers' mappings of the symmetric
//              buffer), then a one-CTA kernel meets the peers (after it, every rank's chunk-i
//              copies into this rank have completed); the own shard's copy into the local A_global
//              runs on a second copy stream, so that it does not delay the first chunk's barrier
//              (measured 2.5 % faster at the large size than after the peers' copies on the same
//              stream; PKBX_OWN=0 puts it back there). cuBLAS computes chunk i on ctx->stream once
//              its barrier and own copy are through, while chunk i+1 moves. The copy engines
//              leave every SM to the GEMM (an earlier version pushed with 48 CTAs of SM stores,
//              which slowed the GEMM by more than the transfer it hid). Only the first chunk's
//              transfer is exposed. C from a time model (GEMM ~600 TFLOP/s, link ~300 GB/s, ~4 us
//              per extra stage), chunks of >= 256 rows; PKBX_STAGES=<C> overrides it. Tried and
//              dropped (2 x H200, large size): chunks growing 1, 2, 4, 8, 8, ... measured 2-7 %
//              slower than uniform chunks; a first chunk of 1/2 or 1/4 of the others, 1-9 % slower;
//              16 stages, 4-5 % slower than 8 (one run each, single-run noise ~0.5 %).
//   NCCL       K/W x e not a multiple of 16 bytes, or no load/store peers: ncclAllGather, a
//              concatenation kernel, cuBLAS.
// Buffer reuse: A_global is double-buffered by call parity. Peers write into half k % 2 in call k
// only after their call k-1 push (or barrier) kernels met this rank's, which started after this
// rank's call k-2 GEMMs (the last readers of that half) had finished: every call's side-stream work
// starts after what ctx->stream held when the call began.
#include "fused.cuh"

using namespace pkbx;

namespace {

constexpr int kAgThreads = 512;

/// Rows [r0, r1) of this rank's shard (ppr packs per row) into columns [rank ppr, (rank+1) ppr) of
/// every rank's A_global (kpr packs per row), then a barrier with the same block on every peer.
template <typename T>
__global__ void __launch_bounds__(kAgThreads)
    ag_push(ncclDevComm dc, ncclWindow_t win, size_t off, const Pack<T>* __restrict__ a, long long r0, long long r1, int ppr,
            int kpr, int W, int rank) {
  Pack<T>* dst[kMaxW];
#pragma unroll
  for (int i = 0; i < kMaxW; ++i)
    if (i < W) dst[i] = lsa_ptr<Pack<T>>(win, off, (rank + 1 + i) % W) + rank * ppr;  // own copy last
  const size_t n = static_cast<size_t>(r1 - r0) * ppr;
  for (size_t j = first_index(); j < n; j += grid_stride()) {
    const size_t row = r0 + j / ppr, c = j % ppr;
    const Pack<T> v = a[row * ppr + c];
    const size_t o = row * kpr + c;
#pragma unroll
    for (int i = 0; i < kMaxW; ++i)
      if (i < W) dst[i][o] = v;
  }
  barrier_at(dc, 0);
}

/// Meets the same kernel on every peer: launched after this rank's copies of a chunk, it returns
/// once every rank's copies of that chunk (into this rank among others) have completed.
__global__ void chunk_barrier(ncclDevComm dc) { barrier_at(dc, 0); }

/// NCCL path: gathered [W][M][Kl] -> A_global [M][W Kl].
template <typename T>
__global__ void concat_k(const T* __restrict__ g, T* __restrict__ a, long long M, long long Kl, int W) {
  const size_t total = static_cast<size_t>(M) * Kl * W;
  for (size_t i = first_index(); i < total; i += grid_stride()) {
    const size_t row = i / (Kl * W), col = i % (Kl * W), r = col / Kl, c = col % Kl;
    a[i] = g[(r * M + row) * Kl + c];
  }
}

struct State {
  LazySymmetric sym;
  SideStream side, own;  // own: the own shard's copies into A_global (unless PKBX_OWN=0)
  bool own_stream = true;
  void* scratch = nullptr;  // NCCL path: gathered shards, then A_global
  bool decided = false, fast = false;
  int M = 0, N = 0, Kl = 0, C = 1;
  size_t half = 0;
  unsigned long long calls = 0;

  void shape(const pkb_tensor* in, const pkb_tensor*) {
    M = static_cast<int>(in[0].shape[0]);
    Kl = static_cast<int>(in[0].shape[1]);
    N = static_cast<int>(in[1].shape[1]);
  }
  int release(pkb_context* ctx) {
    side.destroy();
    own.destroy();
    if (scratch) cudaFree(scratch), scratch = nullptr;
    return sym.release(ctx);
  }
};

template <typename T>
struct AgGemm {
  static int run(pkb_context* ctx, State* st, const pkb_tensor* in, pkb_tensor* out) {
    const int W = ctx->world, M = st->M, N = st->N, Kl = st->Kl, K = Kl * W;
    const size_t e = sizeof(T);
    const pkb_dtype d = in[0].dtype;
    if (!st->decided) {
      st->decided = true;
      st->fast = ctx->topo.all_pairs_p2p && W <= kMaxW && (static_cast<size_t>(Kl) * e) % 16 == 0;
      if (st->fast) {
        const double tc = (W - 1.0) * M * Kl * e / kLinkBytesPerSecond;
        st->C = pick_stages(gemm_seconds(M, N, K, ctx->dtype), tc, M, 256);
        st->half = round_up(static_cast<size_t>(M) * K * e, 256);
        if (st->sym.ensure(ctx, 2 * st->half) != 0) return 1;
        if (const char* v = std::getenv("PKBX_OWN")) st->own_stream = std::atoi(v) == 1;
        if (st->C > 1 && (st->side.create() != 0 || (st->own_stream && st->own.create() != 0))) {
          ctx->set_error(ctx, "cannot create the side stream");
          return 1;
        }
      } else {
        PKB_CUDA(ctx, cudaMalloc(&st->scratch, 2 * static_cast<size_t>(M) * K * e));
      }
    }
    const T* A = static_cast<const T*>(in[0].data);
    const T* B = static_cast<const T*>(in[1].data);
    T* Cout = static_cast<T*>(out[0].data);
    if (!st->fast) {
      T* g = static_cast<T*>(st->scratch);
      T* ag = g + static_cast<size_t>(M) * K;
      PKB_NCCL(ctx, ncclAllGather(A, g, static_cast<size_t>(M) * Kl, pkb_nccl_dtype(d), ctx->comm, ctx->stream));
      concat_k<T><<<blocks_for(static_cast<size_t>(M) * K / 8), kAgThreads, 0, ctx->stream>>>(g, ag, M, Kl, W);
      PKB_LAUNCH(ctx);
      PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, M, N, K, ag, K, B, N, Cout, N));
      return 0;
    }
    const size_t off = (st->calls++ % 2) * st->half;
    const T* Ag = reinterpret_cast<const T*>(st->sym.local(off));
    const int ppr = static_cast<int>(Kl * e / 16), kpr = ppr * W;
    const auto* a = reinterpret_cast<const Pack<T>*>(A);
    if (st->C == 1) {
      ag_push<T><<<blocks_for(static_cast<size_t>(M) * ppr), kAgThreads, 0, ctx->stream>>>(
          *ctx->devcomm, st->sym.buf.window, off, a, 0, M, ppr, kpr, W, ctx->rank);
      PKB_LAUNCH(ctx);
      PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, M, N, K, Ag, K, B, N, Cout, N));
      return 0;
    }
    // Copies and barriers first (all on the side stream, after everything already on ctx->stream),
    // then the GEMMs, each after its chunk's barrier.
    PKB_CUDA(ctx, stream_after(st->side.s, ctx->stream, st->side.ev[st->C]));
    if (st->own_stream) PKB_CUDA(ctx, stream_after(st->own.s, ctx->stream, st->own.ev[st->C]));
    const size_t pitch_src = static_cast<size_t>(Kl) * e, pitch_dst = static_cast<size_t>(K) * e;
    const size_t col = static_cast<size_t>(ctx->rank) * Kl;
    for (int i = 0; i < st->C; ++i) {
      long long r0, r1;
      stage_rows(M, st->C, i, 64, &r0, &r1);
      if (r1 > r0) {
        const T* src = A + static_cast<size_t>(r0) * Kl;
        for (int j = 1; j <= W; ++j) {  // peers first, own copy last
          char* dst = static_cast<char*>(st->sym.buf.peers[(ctx->rank + j) % W]) + off + (static_cast<size_t>(r0) * K + col) * e;
          cudaStream_t cs = j == W && st->own_stream ? st->own.s : st->side.s;
          PKB_CUDA(ctx, cudaMemcpy2DAsync(dst, pitch_dst, src, pitch_src, pitch_src, r1 - r0, cudaMemcpyDeviceToDevice, cs));
        }
        chunk_barrier<<<1, 128, 0, st->side.s>>>(*ctx->devcomm);
        PKB_LAUNCH(ctx);
      }
      PKB_CUDA(ctx, cudaEventRecord(st->side.ev[i], st->side.s));
      if (st->own_stream) PKB_CUDA(ctx, cudaEventRecord(st->own.ev[i], st->own.s));
    }
    for (int i = 0; i < st->C; ++i) {
      long long r0, r1;
      stage_rows(M, st->C, i, 64, &r0, &r1);
      PKB_CUDA(ctx, cudaStreamWaitEvent(ctx->stream, st->side.ev[i], 0));  // the last wait joins the side stream
      if (st->own_stream) PKB_CUDA(ctx, cudaStreamWaitEvent(ctx->stream, st->own.ev[i], 0));
      if (r1 > r0)
        PKB_CUBLAS(ctx, gemm_rm(ctx->cublas, d, static_cast<int>(r1 - r0), N, K, Ag + r0 * K, K, B, N, Cout + r0 * N, N));
    }
    return 0;
  }
};

}  // namespace

using Entry = Expert<State, AgGemm>;

extern "C" int pkb_init(pkb_context* ctx) { return Entry::init(ctx); }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) { return Entry::run(ctx, in, out); }

extern "C" int pkb_finalize(pkb_context* ctx) { return Entry::finalize(ctx); }
