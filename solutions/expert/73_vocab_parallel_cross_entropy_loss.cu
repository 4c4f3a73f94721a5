// Expert solution for problem 73 (cross-entropy loss over vocabulary-sharded logits).
// loss[row] = log(sum over the full vocabulary of exp(x - max)) - (x[target] - max), every rank.
//
// The baseline runs three all-reduces (max, target logit, sum of exp) with kernels in between and
// subtracts the max from the logits in place. Here the three become one exchange: each rank reduces
// its shard of every row to a triple (local max m_r, s_r = sum exp(x - m_r) in fp32, the target logit
// if this rank owns it), publishes the triples, and every rank merges the W triples of each row
// (online log-sum-exp: M = max m_r, S = sum s_r exp(m_r - M)). The logits are left untouched: the
// spec marks them mutable, only `loss` is compared.
//
// Numerics: the baseline's per-row roundings to D are kept where they are large and cheap to
// reproduce: the target logit is D(x_t - M) as after the in-place subtraction, log(S) is taken of
// D(S) and rounded to D, and the difference is rounded to D. Only the per-element D roundings of
// exp (relative 2^-9 each, averaging out in the sum) are not reproduced; S is more accurate here.
//
// Variants:
//   fused  one kernel, one barrier: G lanes per row (4 packs in flight per lane) reduce the shard to
//          its triple, one 16-byte store per row into this call's half of a symmetric array, meet the
//          same block on every peer, then one thread per row loads the W triples (all loads issued
//          before use) and writes the loss. Each block owns a contiguous range of rows in both
//          phases, so a block only reads triples the same block wrote on its peers.
//   NCCL   no load/store peers: the same two phases around an ncclAllGather of the triples.
#include "fused.cuh"

using namespace pkbx;

namespace {

constexpr int kThreadsCe = 512;
constexpr int kUnroll = 4;  // packs per lane in flight

/// Lanes per row: enough that each lane has about kUnroll packs, a power of two, at most 32.
inline int lanes_for(long long ppr) {
  int g = 1;
  while (g < 32 && static_cast<long long>(g) * kUnroll < ppr) g *= 2;
  return g;
}

struct Online {
  float m = -INFINITY, s = 0.f;
  __device__ __forceinline__ void add_block(const float* v, int n) {
    float bm = v[0];
    for (int k = 1; k < n; ++k) bm = fmaxf(bm, v[k]);
    if (bm > m) {
      s *= __expf(m - bm);
      m = bm;
    }
    for (int k = 0; k < n; ++k) s += __expf(v[k] - m);
  }
  /// Merge across the G lanes of a group (G divides 32; every lane of the warp must call this).
  __device__ __forceinline__ void merge(int G) {
    const float M = warp_max(m, G);
    float t = (m == -INFINITY) ? 0.f : s * __expf(m - M);
    s = warp_sum(t, G);
    m = M;
  }
};

/// Phase 1 for one row: this group's lanes reduce the row to (m, s). Packs when the row is 16-byte
/// aligned, elements otherwise.
template <typename T>
__device__ __forceinline__ Online reduce_row(const T* __restrict__ row, int V, int gl, int G, bool packed) {
  Online o;
  if (packed) {
    const Pack<T>* pr = reinterpret_cast<const Pack<T>*>(row);
    const int ppr = V / Pack<T>::N;
    for (int c0 = gl; c0 < ppr; c0 += G * kUnroll) {
      Pack<T> x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (c0 + u * G < ppr) x[u] = pr[c0 + u * G];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (c0 + u * G < ppr) {
          float v[Pack<T>::N];
#pragma unroll
          for (int k = 0; k < Pack<T>::N; ++k) v[k] = to_f(x[u].v[k]);
          o.add_block(v, Pack<T>::N);
        }
    }
  } else {
    for (int c = gl; c < V; c += G) {
      float v = to_f(row[c]);
      o.add_block(&v, 1);
    }
  }
  return o;
}

/// The loss from a row's merged statistics, with the baseline's roundings to D.
template <typename T>
__device__ __forceinline__ T row_loss(float M, float S, bool owned, float xt) {
  const float pred = owned ? rnd<T>(xt - M) : 0.f;
  return from_f<T>(rnd<T>(logf(rnd<T>(S))) - pred);
}

/// Phase 1 over rows [row0, row1): triples (m, s, x_target or 0) into `tri`.
template <typename T>
__device__ __forceinline__ void local_triples(const T* __restrict__ logits, const long long* __restrict__ target, float4* tri,
                                              int row0, int row1, int V, int G, bool packed, int rank) {
  const int groups = blockDim.x / G, gid = threadIdx.x / G, gl = threadIdx.x % G;
  const long long lo = static_cast<long long>(rank) * V;
  for (int base = row0; base < row1; base += groups) {  // uniform trip count: shuffles see whole warps
    const int row = base + gid;
    const bool live = row < row1;
    Online o;
    if (live) o = reduce_row<T>(logits + static_cast<size_t>(row) * V, V, gl, G, packed);
    o.merge(G);
    if (live && gl == 0) {
      const long long t = target[row];
      const bool mine = t >= lo && t < lo + V;
      const float xt = mine ? to_f(logits[static_cast<size_t>(row) * V + (t - lo)]) : 0.f;
      tri[row] = make_float4(o.m, o.s, xt, 0.f);
    }
  }
}

/// Phase 2 for one row: merge the W triples, pick the owner's target logit.
template <typename T>
__device__ __forceinline__ T merge_row(const float4 (&q)[kMaxW], int W, long long t, int V) {
  float M = -INFINITY;
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W) M = fmaxf(M, q[p].x);
  float S = 0.f;
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W && q[p].x != -INFINITY) S += q[p].y * __expf(q[p].x - M);
  const long long owner = t >= 0 ? t / V : -1;
  float xt = 0.f;
#pragma unroll
  for (int p = 0; p < kMaxW; ++p)
    if (p < W && p == owner) xt = q[p].z;
  return row_loss<T>(M, S, owner >= 0 && owner < W, xt);
}

template <typename T>
__global__ void __launch_bounds__(kThreadsCe)
    ce_fused(ncclDevComm dc, ncclWindow_t win, size_t off, const T* __restrict__ logits,
             const long long* __restrict__ target, T* __restrict__ loss, int rows, int V, int rpb, int G, bool packed,
             int W, int rank) {
  const int row0 = blockIdx.x * rpb, row1 = min(rows, row0 + rpb);
  float4* mine = static_cast<float4*>(ncclGetLocalPointer(win, off));
  local_triples<T>(logits, target, mine, row0, row1, V, G, packed, rank);
  barrier_at(dc, 0);
  for (int row = row0 + threadIdx.x; row < row1; row += blockDim.x) {
    float4 q[kMaxW];
#pragma unroll
    for (int p = 0; p < kMaxW; ++p)
      if (p < W) q[p] = lsa_ptr<const float4>(win, off, p)[row];
    loss[row] = merge_row<T>(q, W, target[row], V);
  }
}

// ---- NCCL path -----------------------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kThreadsCe)
    ce_local(const T* __restrict__ logits, const long long* __restrict__ target, float4* tri, int rows, int V, int rpb, int G,
             bool packed, int rank) {
  const int row0 = blockIdx.x * rpb, row1 = min(rows, row0 + rpb);
  local_triples<T>(logits, target, tri, row0, row1, V, G, packed, rank);
}

template <typename T>
__global__ void ce_merge(const float4* __restrict__ all, const long long* __restrict__ target, T* __restrict__ loss, int rows,
                         int V, int W) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += gridDim.x * blockDim.x) {
    float4 q[kMaxW];
#pragma unroll
    for (int p = 0; p < kMaxW; ++p)
      if (p < W) q[p] = all[static_cast<size_t>(p) * rows + row];
    loss[row] = merge_row<T>(q, W, target[row], V);
  }
}

struct State {
  LazySymmetric sym;
  float4* tri = nullptr;  // NCCL path: [rows] local triples, then [W][rows] gathered
  bool decided = false, fused = false;
  int rows = 0, V = 0, rpb = 0, grid = 0, G = 0;
  bool packed = false;
  size_t half = 0;
  unsigned long long calls = 0;
};

template <typename T>
struct Loss {
  static int run(pkb_context* ctx, State* st, const pkb_tensor* in, pkb_tensor* out) {
    const int W = ctx->world, rows = st->rows, V = st->V;
    if (!st->decided) {
      st->decided = true;
      st->packed = (static_cast<size_t>(V) * sizeof(T)) % 16 == 0;
      st->G = lanes_for(st->packed ? V / Pack<T>::N : (V + kUnroll - 1) / kUnroll);
      const int max_grid = std::min(kMaxBlocks, std::max(ctx->topo.sm_count, 1));
      st->rpb = std::max(1, (rows + max_grid - 1) / max_grid);
      st->grid = std::max(1, (rows + st->rpb - 1) / st->rpb);
      st->fused = ctx->topo.all_pairs_p2p && W <= kMaxW;
      st->half = round_up(static_cast<size_t>(rows) * sizeof(float4), 256);
      if (st->fused) {
        if (st->sym.ensure(ctx, 2 * st->half) != 0) return 1;
      } else {
        PKB_CUDA(ctx, cudaMalloc(&st->tri, (1 + static_cast<size_t>(W)) * st->half));
      }
    }
    const T* x = static_cast<const T*>(in[0].data);
    const long long* t = static_cast<const long long*>(in[1].data);
    T* y = static_cast<T*>(out[0].data);
    if (st->fused) {
      const size_t off = (st->calls++ % 2) * st->half;
      ce_fused<T><<<st->grid, kThreadsCe, 0, ctx->stream>>>(*ctx->devcomm, st->sym.buf.window, off, x, t, y, rows, V, st->rpb,
                                                            st->G, st->packed, W, ctx->rank);
      PKB_LAUNCH(ctx);
      return 0;
    }
    float4* all = reinterpret_cast<float4*>(reinterpret_cast<char*>(st->tri) + st->half);
    ce_local<T><<<st->grid, kThreadsCe, 0, ctx->stream>>>(x, t, st->tri, rows, V, st->rpb, st->G, st->packed, ctx->rank);
    PKB_LAUNCH(ctx);
    PKB_NCCL(ctx, ncclAllGather(st->tri, all, static_cast<size_t>(rows) * 4, ncclFloat32, ctx->comm, ctx->stream));
    ce_merge<T><<<std::max(1, std::min((rows + 255) / 256, 1024)), 256, 0, ctx->stream>>>(all, t, y, rows, V, W);
    PKB_LAUNCH(ctx);
    return 0;
  }
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  ctx->user = new State{};
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* st = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];
  st->V = static_cast<int>(x.shape[x.ndim - 1]);
  st->rows = static_cast<int>(pkb_numel(&x) / st->V);
  int rc = dispatch_t<Loss>(x.dtype, ctx, st, in, out);
  if (rc == 2) ctx->set_error(ctx, "unsupported dtype");
  return rc == 0 ? 0 : 1;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  int rc = st->sym.release(ctx);
  if (st->tri) cudaFree(st->tri);
  delete st;
  ctx->user = nullptr;
  return rc;
}
