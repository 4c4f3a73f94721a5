// Baseline for problem 77 (MAGI-1 context-shuffle-overlap attention), PKB's schedule op by op:
//
//   1. swap_blocks   query [R, spb, W, LQ Dh] -> qsend [R, W, spb, LQ Dh] (PKB's _split_query) and
//                    key_value [T, W, LKV 2Dh] -> kvsend [W, T, LKV 2Dh] (_redistribute_kv's pack)
//   2. all-to-all    on a side stream (PyTorch's NCCL stream), grouped send/recv of W equal blocks:
//                    k|v (PKB: blocking) and range 0's q (PKB: async, waited at once), then range
//                    1's q; the compute stream waits for range i's q before its attention
//   3. attention     per range i, flash attention (below) of qrecv[i] [W spb, LQ, Dh] over the
//                    range's C keys, read from kvrecv through PKB's _kv_by_range index map (position
//                    p is rank p / spb's token i spb + p % spb; positions >= C are clipped), query
//                    head h on kv head h / G (the repeat_interleave of _sdpa) -> osend[i]
//   4. all-to-all    after range i's attention: range i+2's q together with range i's output (PKB
//                    concatenates them along the last dim into one all-to-all; one NCCL group of
//                    both moves the same bytes without the copy), overlapped with range i+1's
//                    attention; after the last range its output alone
//   5. swap_blocks   orecv [R, W, spb, LQ Dh] -> out [R, spb, W, LQ Dh] (_restore_output)
//
// The attention kernel is FlashAttention-2's forward as PyTorch's SDPA runs it for bf16 (non-causal,
// scale Dh^-1/2): fp32 scores from bf16 mma.sync, an online softmax in fp32, P rounded to bf16 for
// P V, the normaliser summed from the unrounded P, O / l rounded to bf16.
//   Purpose:      one CTA per (128 queries, query head); 4 warps of 32 query rows (two 16-row mma
//                 atoms, as FlashAttention-2's 128 x 64 tiles for head_dim 128), 2 CTAs per SM.
//   Approach:     Q (128 x 128) stays in shared memory; K and V tiles of 64 keys double-buffered
//                 in shared memory by cp.async (16-byte chunks XOR-swizzled by row so that ldmatrix
//                 is conflict-free); S = Q K^T and O += P V with m16n8k16 bf16 mma; P stays in
//                 registers (the S accumulator layout is the A-operand layout).
//   Requirements: Dh = 128; 16-byte aligned rows (Dh and 2 Dh bf16 are); any number of queries and
//                 keys (out-of-range rows are zero-filled and masked).
//   Use when:     the problem's shapes; not tuned on a GPU yet (ptxas: 255 registers, 64 bytes of
//                 spills; no split-K, no warp specialisation, no wgmma).
#include <cuda_bf16.h>
#include <pkb/solution.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace {

constexpr int kDh = 128;                  // head dim (the kernel is written for it)
constexpr int kBlockM = 128;              // queries per CTA
constexpr int kBlockN = 64;               // keys per tile
constexpr int kMAtoms = 2;                // 16-row mma atoms per warp: 32 query rows a warp, so that
                                          // every K and V fragment read from shared memory feeds 2 mmas
constexpr int kWarps = kBlockM / (16 * kMAtoms);
constexpr int kThreads = kWarps * 32;
constexpr int kChunks = kDh / 8;          // 16-byte chunks per row of Dh bf16
constexpr size_t kSmemBytes = (kBlockM + 4 * kBlockN) * kDh * sizeof(__nv_bfloat16);  // Q, 2 x (K, V)

// ---- device helpers ----------------------------------------------------------------------------

// Offset of element (row, col) of a [rows][kDh] tile whose 16-byte chunks are XOR-swizzled by row.
__device__ __forceinline__ int swz(int row, int col) { return row * kDh + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  int bytes = valid ? 16 : 0;  // 0: zero-fill (gmem must still be a valid address)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* smem) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* smem) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// d += a (16 x 16, row-major) * b (16 x 8, column-major), bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));  // ex2(-inf) = +0
  return y;
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo: the lower column
  return *reinterpret_cast<unsigned*>(&v);
}

// ---- kernels -----------------------------------------------------------------------------------

// dst[a][q][p][x] = src[a][p][q][x] in 16-byte units: the token/head-group swaps of PKB's
// permute(...).contiguous() calls (i runs over the destination, so writes are coalesced).
__global__ void swap_blocks(const uint4* __restrict__ src, uint4* __restrict__ dst, long long A, long long P,
                            long long Q, long long X) {
  long long n = A * P * Q * X;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long x = i % X, r = i / X;
    long long p = r % P;
    r /= P;
    long long q = r % Q, a = r / Q;
    dst[i] = src[((a * P + p) * Q + q) * X + x];
  }
}

struct AttnArgs {
  const __nv_bfloat16* q;   // this range's received queries [nq][LQ][Dh], row s spb + t
  const __nv_bfloat16* kv;  // received k|v [W][T][LKV][2 Dh] (rank s's tokens of kv-head group `rank`)
  __nv_bfloat16* o;         // this range's outputs [nq][LQ][Dh]
  int nq;                   // W spb queries
  int nk;                   // C keys
  int spb, T, range, LQ, LKV, G;
  float scale_log2;         // Dh^-1/2 log2(e): softmax in base 2
};

__global__ void __launch_bounds__(kThreads, 8 / kWarps) flash_attention(AttnArgs a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sK = sQ + kBlockM * kDh;  // [2][kBlockN][kDh]
  __nv_bfloat16* sV = sK + 2 * kBlockN * kDh;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.x * kBlockM;
  const int h = blockIdx.y, hk = h / a.G;  // local kv head: (rank LQ + h) / G - rank LKV = h / G
  const int ntiles = (a.nk + kBlockN - 1) / kBlockN;

  // Q tile: kBlockM x kChunks chunks; rows past nq are zero.
  for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
    int row = c / kChunks, ch = c % kChunks, qrow = m0 + row;
    bool valid = qrow < a.nq;
    const __nv_bfloat16* src = a.q + (static_cast<size_t>(valid ? qrow : 0) * a.LQ + h) * kDh + ch * 8;
    cp_async16(sQ + swz(row, ch * 8), src, valid);
  }
  // K and V tile j into buffer b: key p of the range is rank p / spb's token range spb + p % spb.
  // Thread tid always moves chunk tid % kChunks of rows tid / kChunks + i kThreads / kChunks.
  const int ld_ch = tid % kChunks, ld_row = tid / kChunks;
  auto load_kv = [&](int j, int b) {
#pragma unroll
    for (int i = 0; i < kBlockN * kChunks / kThreads; ++i) {
      const int row = ld_row + i * (kThreads / kChunks), p = j * kBlockN + row;
      const bool valid = p < a.nk;
      const int pp = valid ? p : 0;
      const int src = pp / a.spb, tok = a.range * a.spb + pp % a.spb;
      const __nv_bfloat16* base = a.kv + ((static_cast<size_t>(src) * a.T + tok) * a.LKV + hk) * (2 * kDh) + ld_ch * 8;
      const int off = b * kBlockN * kDh + swz(row, ld_ch * 8);
      cp_async16(sK + off, base, valid);
      cp_async16(sV + off, base + kDh, valid);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  float o[kMAtoms][kDh / 8][4];            // O accumulators: per 16-row atom, 16 d-tiles of 8
  float m[kMAtoms][2], l[kMAtoms][2];      // running max (base 2) and sum (this thread's columns) of rows g, g + 8
#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma) {
    m[ma][0] = m[ma][1] = -INFINITY;
    l[ma][0] = l[ma][1] = 0.0f;
#pragma unroll
    for (int dt = 0; dt < kDh / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[ma][dt][e] = 0.0f;
  }

  const int g = lane / 4, c4 = lane % 4;
  const int wrow = warp * 16 * kMAtoms;    // this warp's first query row in the tile
  for (int j = 0; j < ntiles; ++j) {
    if (j + 1 < ntiles) {
      load_kv(j + 1, (j + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* k = sK + (j & 1) * kBlockN * kDh;
    const __nv_bfloat16* v = sV + (j & 1) * kBlockN * kDh;

    // S = Q K^T: per atom 8 n-tiles of 8 keys. d chunk outer; one ldmatrix.x4 holds the B fragments
    // of two n-tiles for one 16-wide d chunk and serves every atom (consecutive mmas accumulate
    // into different tiles).
    float s[kMAtoms][kBlockN / 8][4];
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[ma][nt][e] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < kDh / 16; ++kc) {
      unsigned qa[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma)
        ldsm_x4(qa[ma], sQ + swz(wrow + ma * 16 + (lane & 15), kc * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        unsigned b[4];
        ldsm_x4(b, k + swz(np * 16 + (lane & 7) + ((lane >> 4) << 3), kc * 16 + (((lane >> 3) & 1) << 3)));
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          mma_bf16(s[ma][2 * np], qa[ma], b[0], b[1]);
          mma_bf16(s[ma][2 * np + 1], qa[ma], b[2], b[3]);
        }
      }
    }

    // Online softmax (base 2). Per atom, the thread holds rows g (e = 0, 1) and g + 8 (e = 2, 3),
    // keys nt 8 + 2 c4 + (e & 1). Only the last tile can hold keys past nk.
    const bool partial = (j + 1) * kBlockN > a.nk;
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma) {
      float mx[2] = {m[ma][0], m[ma][1]};
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int key = j * kBlockN + nt * 8 + 2 * c4 + (e & 1);
          float x = (!partial || key < a.nk) ? s[ma][nt][e] * a.scale_log2 : -INFINITY;
          s[ma][nt][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        alpha[r] = fast_exp2(m[ma][r] - mx[r]);  // the tile has a valid key: mx is finite; m = -inf -> 0
        m[ma][r] = mx[r];
        l[ma][r] *= alpha[r];
      }
#pragma unroll
      for (int dt = 0; dt < kDh / 8; ++dt) {
        o[ma][dt][0] *= alpha[0];
        o[ma][dt][1] *= alpha[0];
        o[ma][dt][2] *= alpha[1];
        o[ma][dt][3] *= alpha[1];
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float p = fast_exp2(s[ma][nt][e] - m[ma][e >> 1]);
          s[ma][nt][e] = p;
          l[ma][e >> 1] += p;
        }
    }

    // O += P V: P's A fragments are pairs of S n-tiles; V's B fragments by ldmatrix.trans, each
    // serving every atom.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      unsigned pa[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        pa[ma][0] = pack_bf16(s[ma][2 * kk][0], s[ma][2 * kk][1]);
        pa[ma][1] = pack_bf16(s[ma][2 * kk][2], s[ma][2 * kk][3]);
        pa[ma][2] = pack_bf16(s[ma][2 * kk + 1][0], s[ma][2 * kk + 1][1]);
        pa[ma][3] = pack_bf16(s[ma][2 * kk + 1][2], s[ma][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDh / 16; ++dp) {
        unsigned b[4];
        ldsm_x4_trans(b, v + swz(kk * 16 + (lane & 15), dp * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          mma_bf16(o[ma][2 * dp], pa[ma], b[0], b[1]);
          mma_bf16(o[ma][2 * dp + 1], pa[ma], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with buffer j & 1 before it is refilled
  }

#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[ma][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
      const int qrow = m0 + wrow + ma * 16 + g + 8 * r;
      if (qrow >= a.nq) continue;
      __nv_bfloat16* dst = a.o + (static_cast<size_t>(qrow) * a.LQ + h) * kDh;
#pragma unroll
      for (int dt = 0; dt < kDh / 8; ++dt)
        *reinterpret_cast<__nv_bfloat162*>(dst + dt * 8 + 2 * c4) =
            __floats2bfloat162_rn(o[ma][dt][2 * r] * inv, o[ma][dt][2 * r + 1] * inv);
    }
}

// ---- host side ---------------------------------------------------------------------------------

struct Dims {
  long long R, C, spb, T, Hq, Hkv, LQ, LKV, G, Dh;
};

struct State {
  Dims d{};
  cudaStream_t comm = nullptr;           // side stream for the all-to-alls (PyTorch's NCCL stream)
  cudaEvent_t packed = nullptr;          // compute -> comm: send buffers written (and last call done)
  cudaEvent_t out_ready = nullptr;       // compute -> comm: range i's output written
  cudaEvent_t done = nullptr;            // comm -> compute: last output received
  std::vector<cudaEvent_t> q_ready;      // comm -> compute: range i's queries (and, for 0, k|v) arrived
  __nv_bfloat16 *kvsend = nullptr, *kvrecv = nullptr;   // [W, T, LKV, 2 Dh]
  __nv_bfloat16 *qsend = nullptr, *qrecv = nullptr;     // [R, W, spb, LQ, Dh]
  __nv_bfloat16 *osend = nullptr, *orecv = nullptr;     // [R, W, spb, LQ, Dh]
};

unsigned grid_for(long long n, const pkb_context* ctx) {
  long long cap = 16LL * (ctx->topo.sm_count > 0 ? ctx->topo.sm_count : 132);
  long long b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

int swap(pkb_context* ctx, const void* src, void* dst, long long A, long long P, long long Q, long long elems) {
  long long X = elems / 8;  // 16-byte units (elems is a multiple of Dh = 128)
  swap_blocks<<<grid_for(A * P * Q * X, ctx), 256, 0, ctx->stream>>>(static_cast<const uint4*>(src),
                                                                   static_cast<uint4*>(dst), A, P, Q, X);
  PKB_LAUNCH(ctx);
  return 0;
}

// W equal blocks of `blk` elements: block j of `send` to rank j, rank j's into block j of `recv`
// (dist.all_to_all_single with equal splits). Callers may wrap several in one NCCL group.
int all_to_all(pkb_context* ctx, cudaStream_t s, const __nv_bfloat16* send, __nv_bfloat16* recv, size_t blk) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int peer = 0; peer < ctx->world; ++peer) {
    PKB_NCCL(ctx, ncclSend(send + peer * blk, blk, ncclBfloat16, peer, ctx->comm, s));
    PKB_NCCL(ctx, ncclRecv(recv + peer * blk, blk, ncclBfloat16, peer, ctx->comm, s));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  auto p = [&](const char* name) { return static_cast<long long>(ctx->param(ctx, name, 0)); };
  Dims d{p("R"), p("C"), p("spb"), p("T"), p("Hq"), p("Hkv"), p("LQ"), p("LKV"), p("G"), p("Dh")};
  st->d = d;
  if (d.Dh != kDh) {
    ctx->set_error(ctx, "the baseline's attention kernel is written for head_dim 128");
    return 1;
  }
  const size_t W = static_cast<size_t>(ctx->world);
  const size_t kv_elems = W * d.T * d.LKV * 2 * d.Dh, q_elems = static_cast<size_t>(d.T) * d.Hq * d.Dh;
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&st->comm, cudaStreamNonBlocking));
  for (cudaEvent_t* e : {&st->packed, &st->out_ready, &st->done})
    PKB_CUDA(ctx, cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  st->q_ready.assign(static_cast<size_t>(d.R), nullptr);
  for (auto& e : st->q_ready) PKB_CUDA(ctx, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (__nv_bfloat16** b : {&st->kvsend, &st->kvrecv})
    PKB_CUDA(ctx, cudaMalloc(reinterpret_cast<void**>(b), kv_elems * sizeof(__nv_bfloat16)));
  for (__nv_bfloat16** b : {&st->qsend, &st->qrecv, &st->osend, &st->orecv})
    PKB_CUDA(ctx, cudaMalloc(reinterpret_cast<void**>(b), q_elems * sizeof(__nv_bfloat16)));
  PKB_CUDA(ctx, cudaFuncSetAttribute(flash_attention, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmemBytes)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* st = static_cast<State*>(ctx->user);
  const Dims& d = st->d;
  const long long W = ctx->world;
  if (in[0].shape[0] != d.T || in[0].shape[1] != d.Hq || in[1].shape[1] != d.Hkv) {
    ctx->set_error(ctx, "input shape differs from the size variables pkb_init sized its buffers for");
    return 1;
  }
  if (!aligned16(in[0].data) || !aligned16(in[1].data) || !aligned16(out[0].data)) {
    ctx->set_error(ctx, "the baseline needs 16-byte aligned tensors");
    return 1;
  }
  cudaStream_t s = ctx->stream, c = st->comm;
  const size_t chunk = static_cast<size_t>(d.spb) * d.Hq * d.Dh;  // one range's q or out, all heads
  const size_t blk = static_cast<size_t>(d.spb) * d.LQ * d.Dh;    // ... for one peer
  const size_t kv_blk = static_cast<size_t>(d.T) * d.LKV * 2 * d.Dh;

  // 1. Pack q by (range, head group) and k|v by head group.
  if (swap(ctx, in[0].data, st->qsend, d.R, d.spb, W, d.LQ * d.Dh)) return 1;
  if (swap(ctx, in[1].data, st->kvsend, 1, d.T, W, d.LKV * 2 * d.Dh)) return 1;
  PKB_CUDA(ctx, cudaEventRecord(st->packed, s));
  PKB_CUDA(ctx, cudaStreamWaitEvent(c, st->packed, 0));

  // 2. k|v and range 0's queries, then range 1's.
  PKB_NCCL(ctx, ncclGroupStart());
  if (all_to_all(ctx, c, st->kvsend, st->kvrecv, kv_blk)) return 1;
  if (all_to_all(ctx, c, st->qsend, st->qrecv, blk)) return 1;
  PKB_NCCL(ctx, ncclGroupEnd());
  PKB_CUDA(ctx, cudaEventRecord(st->q_ready[0], c));
  if (d.R > 1) {
    if (all_to_all(ctx, c, st->qsend + chunk, st->qrecv + chunk, blk)) return 1;
    PKB_CUDA(ctx, cudaEventRecord(st->q_ready[1], c));
  }

  AttnArgs a{};
  a.kv = st->kvrecv;
  a.nq = static_cast<int>(W * d.spb);
  a.nk = static_cast<int>(d.C);
  a.spb = static_cast<int>(d.spb);
  a.T = static_cast<int>(d.T);
  a.LQ = static_cast<int>(d.LQ);
  a.LKV = static_cast<int>(d.LKV);
  a.G = static_cast<int>(d.G);
  a.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(d.Dh)));
  const dim3 grid(static_cast<unsigned>((a.nq + kBlockM - 1) / kBlockM), static_cast<unsigned>(d.LQ));
  for (long long i = 0; i < d.R; ++i) {
    // 3. Range i's attention once its queries are here.
    PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->q_ready[i], 0));
    a.q = st->qrecv + i * chunk;
    a.o = st->osend + i * chunk;
    a.range = static_cast<int>(i);
    flash_attention<<<grid, kThreads, kSmemBytes, s>>>(a);
    PKB_LAUNCH(ctx);
    PKB_CUDA(ctx, cudaEventRecord(st->out_ready, s));
    PKB_CUDA(ctx, cudaStreamWaitEvent(c, st->out_ready, 0));
    // 4. Range i+2's queries with range i's output.
    PKB_NCCL(ctx, ncclGroupStart());
    if (i + 2 < d.R && all_to_all(ctx, c, st->qsend + (i + 2) * chunk, st->qrecv + (i + 2) * chunk, blk)) return 1;
    if (all_to_all(ctx, c, st->osend + i * chunk, st->orecv + i * chunk, blk)) return 1;
    PKB_NCCL(ctx, ncclGroupEnd());
    if (i + 2 < d.R) PKB_CUDA(ctx, cudaEventRecord(st->q_ready[i + 2], c));
  }
  PKB_CUDA(ctx, cudaEventRecord(st->done, c));
  PKB_CUDA(ctx, cudaStreamWaitEvent(s, st->done, 0));

  // 5. Back to token-major [T, Hq, Dh].
  return swap(ctx, st->orecv, out[0].data, d.R, W, d.spb, d.LQ * d.Dh);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (__nv_bfloat16* b : {st->kvsend, st->kvrecv, st->qsend, st->qrecv, st->osend, st->orecv})
    PKB_CUDA(ctx, cudaFree(b));
  for (cudaEvent_t e : st->q_ready) PKB_CUDA(ctx, cudaEventDestroy(e));
  for (cudaEvent_t e : {st->packed, st->out_ready, st->done}) PKB_CUDA(ctx, cudaEventDestroy(e));
  PKB_CUDA(ctx, cudaStreamDestroy(st->comm));
  delete st;
  ctx->user = nullptr;
  return 0;
}
