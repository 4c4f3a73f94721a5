// Baseline for problem 64 (distributed two-hop neighbour sampling), PKB's steps per hop:
//   1. partition the frontier by owner (node_to_rank[src]), stable: one single-block counting sort
//      that writes the frontier grouped by owner and, for every frontier node, its grouped position
//      (PKB's rank_offsets[partition_ids] + partition_orders);
//   2. all_to_all_single of the W counts (grouped ncclSend / ncclRecv), both lists to the host;
//   3. all_to_all_single of the frontier ids with those splits;
//   4. owner-side sampling of every received node: the first min(k, deg) entries of its row of this
//      rank's CSC graph and their positions (PKB's per-node loop), compacted with a CUB scan; the
//      per-requester totals;
//   5. all_to_all_single of those totals (PKB also exchanges recv_counts to learn reply_count_counts,
//      which is this rank's own send_counts: that exchange is left out), both lists to the host;
//   6. the replies: sampled ids, edge ids (split by the totals) and per-node counts (split by the
//      request counts), one grouped ncclSend / ncclRecv each, as PKB's three all_to_all_single;
//   7. the replies back in frontier order (PKB's split into chunks and cat over grouped_index), with
//      dst = the frontier node, into the edge list of all hops;
//   8. deduplication by first occurrence (PKB: numpy.unique with return_index, on the host): a node
//      table (id -> index in node, -1 if absent) and per hop the first position of each new id
//      (atomicMin), flags scanned with CUB; the new ids are appended to node and form the next frontier.
// After both hops: row = table[neighbour], col = table[dst] (PKB's relabel through assoc), the sizes,
// and -1 in every entry past them (the outputs are memset to -1 first).
// PKB stops a rank's loop when its frontier or its hop's samples are empty, which leaves its peers
// waiting in the next hop's collectives; here such a rank takes part with empty splits (the answer
// is the same: an empty hop adds nothing).
#include <pkb/solution.h>

#include <cub/cub.cuh>
#include <stdint.h>

namespace {

constexpr int kMaxWorld = 64;  // shared-memory owner counters of the partition kernel
constexpr int kTile = 1024;    // threads of the partition kernel
constexpr int kWarps = kTile / 32;
constexpr int kHops = 2;

struct State {
  int W = 0;
  int64_t n = 0, S = 0, ncap = 0, ecap = 0, fanout[kHops] = {0, 0}, fmax = 0;
  int64_t fr_cap = 0;    // frontier nodes of one hop: max(S, min(n - S, S F1))
  int64_t req_cap = 0;   // requests an owner receives in one hop: W fr_cap
  int64_t* frontier[2] = {nullptr, nullptr};  // [fr_cap] the next frontiers, alternately
  int64_t* send_nodes = nullptr;     // [fr_cap] the frontier grouped by owner
  int64_t* grouped = nullptr;        // [fr_cap] grouped position of every frontier node
  int64_t* counts = nullptr;         // [4 W]: send_counts, recv_counts, send_node_counts, reply_node_counts
  int64_t* host = nullptr;           // pinned [4 W] mirror
  int64_t* recv_nodes = nullptr;     // [req_cap]
  int64_t* samp_counts = nullptr;    // [req_cap + 1] min(k, deg) per received node, then a 0
  int64_t* samp_off = nullptr;       // [req_cap + 1] its exclusive scan
  int64_t* samp_nodes = nullptr;     // [req_cap fmax]
  int64_t* samp_edges = nullptr;     // [req_cap fmax]
  int64_t* reply_nodes = nullptr;    // [fr_cap fmax]
  int64_t* reply_edges = nullptr;    // [fr_cap fmax]
  int64_t* reply_counts = nullptr;   // [fr_cap + 1] per grouped position, then a 0
  int64_t* reply_off = nullptr;      // [fr_cap + 1]
  int64_t* ord_counts = nullptr;     // [fr_cap + 1] per frontier position, then a 0
  int64_t* ord_off = nullptr;        // [fr_cap + 1]
  int64_t* nbr = nullptr;            // [ecap] sampled neighbour of every edge, all hops
  int64_t* dst = nullptr;            // [ecap] its frontier node
  int64_t* table = nullptr;          // [n] node id -> index in node, -1 if absent
  unsigned long long* first = nullptr;  // [n] first position of a new id in this hop's samples
  int64_t* flags = nullptr;          // [fr_cap fmax + 1] 1 at the first occurrence of a new id, then a 0
  int64_t* flag_off = nullptr;       // [fr_cap fmax + 1]
  int64_t* sizes = nullptr;          // [2] device: frontier size, node count
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
};

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/// node[i] = seed[i], table[seed[i]] = i; frontier size and node count = S.
__global__ void start_from_seeds(const int64_t* __restrict__ seeds, int64_t S, int64_t* __restrict__ node,
                                 int64_t* __restrict__ table, int64_t* __restrict__ sizes) {
  GRID_STRIDE(i, S) {
    node[i] = seeds[i];
    table[seeds[i]] = i;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) sizes[0] = sizes[1] = S;
}

/// Stable partition of the frontier (size *frontier_size, at most cap) by owner, one block of kTile threads:
/// send_counts[o], send_nodes (grouped by owner, frontier order within an owner) and grouped[i], the
/// position of frontier node i there. Tiles of kTile nodes; inside a tile, lanes of one owner are
/// ranked with __match_any_sync and warps in order.
__global__ void __launch_bounds__(kTile) partition_by_owner(const int64_t* __restrict__ fr,
                                                            const int64_t* __restrict__ frontier_size, int64_t cap,
                                                            const int64_t* __restrict__ owner_of, int W,
                                                            int64_t* __restrict__ send_counts,
                                                            int64_t* __restrict__ send_nodes,
                                                            int64_t* __restrict__ grouped) {
  __shared__ unsigned long long count[kMaxWorld];
  __shared__ int64_t next[kMaxWorld];             // next free grouped position of every owner
  __shared__ int64_t at_warp[kWarps][kMaxWorld];  // per tile: each warp's nodes of each owner, then their start
  const int64_t f = *frontier_size < cap ? *frontier_size : cap;  // cap: memory only (distinct seeds keep below)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = threadIdx.x; o < W; o += blockDim.x) count[o] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < f; i += blockDim.x) atomicAdd(&count[owner_of[fr[i]]], 1ull);
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t at = 0;
    for (int o = 0; o < W; ++o) {
      next[o] = at;
      send_counts[o] = (int64_t)count[o];
      at += (int64_t)count[o];
    }
  }
  for (int64_t base = 0; base < f; base += kTile) {
    for (int o = lane; o < W; o += 32) at_warp[warp][o] = 0;
    __syncthreads();
    const int64_t i = base + threadIdx.x;
    const int owner = i < f ? (int)owner_of[fr[i]] : -1;
    const unsigned same = __match_any_sync(0xffffffffu, owner);
    const int before = __popc(same & ((1u << lane) - 1));
    if (owner >= 0 && before == 0) at_warp[warp][owner] = __popc(same);
    __syncthreads();
    for (int o = threadIdx.x; o < W; o += blockDim.x) {  // counts -> starts, warps in order
      int64_t run = next[o];
      for (int w = 0; w < kWarps; ++w) {
        int64_t c = at_warp[w][o];
        at_warp[w][o] = run;
        run += c;
      }
      next[o] = run;
    }
    __syncthreads();
    if (owner >= 0) {
      const int64_t pos = at_warp[warp][owner] + before;
      send_nodes[pos] = fr[i];
      grouped[i] = pos;
    }
    __syncthreads();
  }
}

/// counts[i] = min(k, deg) of received node i in this rank's graph (PKB: take = min(k, deg)).
__global__ void count_samples(const int64_t* __restrict__ recv, int64_t R, const int64_t* __restrict__ row_ptr,
                              int64_t k, int64_t* __restrict__ counts) {
  GRID_STRIDE(i, R + 1) {
    if (i == R) {
      counts[i] = 0;
    } else {
      const int64_t v = recv[i], deg = row_ptr[v + 1] - row_ptr[v];
      counts[i] = deg < k ? deg : k;
    }
  }
}

/// Sample j of received node i: col[start + j] and its position start + j, at off[i] + j.
__global__ void write_samples(const int64_t* __restrict__ recv, int64_t R, const int64_t* __restrict__ row_ptr,
                              const int64_t* __restrict__ col, int64_t k, const int64_t* __restrict__ counts,
                              const int64_t* __restrict__ off, int64_t* __restrict__ nodes,
                              int64_t* __restrict__ edges) {
  GRID_STRIDE(t, R * k) {
    const int64_t i = t / k, j = t % k;
    if (j >= counts[i]) continue;
    const int64_t e = row_ptr[recv[i]] + j;
    nodes[off[i] + j] = col[e];
    edges[off[i] + j] = e;
  }
}

/// totals[s] = the samples for requester s: the scan across its block of received nodes.
__global__ void per_requester_totals(const int64_t* __restrict__ recv_counts, int W, const int64_t* __restrict__ off,
                                     int64_t* __restrict__ totals) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int64_t at = 0;
  for (int s = 0; s < W; ++s) {
    totals[s] = off[at + recv_counts[s]] - off[at];
    at += recv_counts[s];
  }
}

/// ord[i] = reply_counts[grouped[i]] for the f frontier nodes, then a 0 (and reply_counts[f] = 0).
__global__ void order_counts(const int64_t* __restrict__ grouped, int64_t f, int64_t* __restrict__ reply_counts,
                             int64_t* __restrict__ ord) {
  GRID_STRIDE(i, f + 1) {
    if (i == f) {
      ord[i] = 0;
      reply_counts[f] = 0;
    } else {
      ord[i] = reply_counts[grouped[i]];
    }
  }
}

/// Sample j of frontier node i, from its reply chunk (grouped position g) to edge
/// base + ord_off[i] + j of the edge list: neighbour, dst = the frontier node, edge id.
__global__ void reorder_replies(const int64_t* __restrict__ fr, int64_t f, int64_t k,
                                const int64_t* __restrict__ grouped,
                                const int64_t* __restrict__ reply_counts, const int64_t* __restrict__ reply_off,
                                const int64_t* __restrict__ ord_off, const int64_t* __restrict__ reply_nodes,
                                const int64_t* __restrict__ reply_edges, int64_t base, int64_t* __restrict__ nbr,
                                int64_t* __restrict__ dst, int64_t* __restrict__ edge) {
  GRID_STRIDE(t, f * k) {
    const int64_t i = t / k, j = t % k, g = grouped[i];
    if (j >= reply_counts[g]) continue;
    const int64_t to = base + ord_off[i] + j, from = reply_off[g] + j;
    nbr[to] = reply_nodes[from];
    dst[to] = fr[i];
    edge[to] = reply_edges[from];
  }
}

/// first[u] = the first position p of this hop's samples holding a node u not yet in node.
__global__ void first_occurrence(const int64_t* __restrict__ nbr, int64_t T, const int64_t* __restrict__ table,
                                 unsigned long long* __restrict__ first) {
  GRID_STRIDE(p, T) {
    const int64_t u = nbr[p];
    if (table[u] < 0) atomicMin(&first[u], (unsigned long long)p);
  }
}

/// flags[p] = 1 where position p is the first occurrence of a new node, then a 0.
__global__ void flag_new(const int64_t* __restrict__ nbr, int64_t T, const int64_t* __restrict__ table,
                         const unsigned long long* __restrict__ first, int64_t* __restrict__ flags) {
  GRID_STRIDE(p, T + 1) {
    if (p == T) {
      flags[p] = 0;
    } else {
      const int64_t u = nbr[p];
      flags[p] = table[u] < 0 && first[u] == (unsigned long long)p ? 1 : 0;
    }
  }
}

/// Appends the new nodes in order of first occurrence: node[count + q] = u, table[u] = count + q,
/// next[q] = u for the q-th flag (q < cap).
__global__ void append_new(const int64_t* __restrict__ nbr, int64_t T, const int64_t* __restrict__ flags,
                           const int64_t* __restrict__ flag_off, const int64_t* __restrict__ sizes, int64_t cap,
                           int64_t* __restrict__ node, int64_t* __restrict__ table, int64_t* __restrict__ next) {
  const int64_t count = sizes[1];
  GRID_STRIDE(p, T) {
    if (!flags[p]) continue;
    const int64_t q = flag_off[p], u = nbr[p];
    node[count + q] = u;
    table[u] = count + q;
    if (q < cap) next[q] = u;
  }
}

/// sizes = (new frontier size, node count + it).
__global__ void advance_sizes(const int64_t* __restrict__ flag_off, int64_t T, int64_t* __restrict__ sizes) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    sizes[0] = flag_off[T];
    sizes[1] += flag_off[T];
  }
}

/// row[e] = table[nbr[e]], col[e] = table[dst[e]]; out_sizes = (node count, E).
__global__ void relabel(const int64_t* __restrict__ nbr, const int64_t* __restrict__ dst, int64_t E,
                        const int64_t* __restrict__ table, const int64_t* __restrict__ sizes,
                        int64_t* __restrict__ row, int64_t* __restrict__ col, int64_t* __restrict__ out_sizes) {
  GRID_STRIDE(e, E) {
    row[e] = table[nbr[e]];
    col[e] = table[dst[e]];
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out_sizes[0] = sizes[1];
    out_sizes[1] = E;
  }
}

/// Exclusive sum of n int64 values with the workspace sized in pkb_init.
int scan(pkb_context* ctx, State* s, const int64_t* in, int64_t* out, int64_t n) {
  size_t bytes = 0;
  PKB_CUDA(ctx, cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, (int)n, ctx->stream));
  if (bytes > s->cub_bytes) PKB_FAIL_(ctx, "scan", "CUB needs more workspace than pkb_init sized");
  PKB_CUDA(ctx, cub::DeviceScan::ExclusiveSum(s->cub_temp, bytes, in, out, (int)n, ctx->stream));
  return 0;
}

/// One all_to_all_single of int64 items: send[r] items from `src` to rank r, recv[r] from rank r into
/// `dst`, at the running offsets (zero-size splits skipped on both sides, as PyTorch does). Inside
/// the caller's ncclGroupStart / ncclGroupEnd where several go together.
int all_to_all_v(pkb_context* ctx, const int64_t* src, const int64_t* send, int64_t* dst, const int64_t* recv) {
  int64_t so = 0, ro = 0;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    if (send[r] > 0) PKB_NCCL(ctx, ncclSend(src + so, (size_t)send[r], ncclInt64, r, ctx->comm, ctx->stream));
    if (recv[r] > 0) PKB_NCCL(ctx, ncclRecv(dst + ro, (size_t)recv[r], ncclInt64, r, ctx->comm, ctx->stream));
    so += send[r];
    ro += recv[r];
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

/// all_to_all_single of one int64 per rank: send[r] to rank r, recv[r] from it.
int all_to_all_one(pkb_context* ctx, const int64_t* send, int64_t* recv) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    PKB_NCCL(ctx, ncclSend(send + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(recv + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

/// Copies counts[from, from + 2W) to the host mirror and waits (PKB's .cpu().tolist()).
int to_host(pkb_context* ctx, State* s, int from) {
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host + from, s->counts + from, 2 * s->W * sizeof(int64_t), cudaMemcpyDeviceToHost,
                                ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  return 0;
}

int64_t sum(const int64_t* v, int n) {
  int64_t t = 0;
  for (int i = 0; i < n; ++i) t += v[i];
  return t;
}

/// One hop with fanout k from frontier `fr` (its size in s->sizes[0]); appends its edges to nbr /
/// dst / edge at *edges and its new nodes to node; the next frontier goes to `next`.
int hop(pkb_context* ctx, State* s, const int64_t* fr, int64_t k, const pkb_tensor* in, int64_t* node, int64_t* edge,
        int64_t* edges, int64_t* next) {
  const int W = s->W;
  const int64_t* row_ptr = static_cast<const int64_t*>(in[1].data);
  const int64_t* col = static_cast<const int64_t*>(in[2].data);
  const int64_t* owner_of = static_cast<const int64_t*>(in[3].data);
  int64_t *send_counts = s->counts, *recv_counts = s->counts + W;
  int64_t *send_node_counts = s->counts + 2 * W, *reply_node_counts = s->counts + 3 * W;
  // 1-2. Partition by owner; the counts to the owners and to the host.
  partition_by_owner<<<1, kTile, 0, ctx->stream>>>(fr, s->sizes, s->fr_cap, owner_of, W, send_counts, s->send_nodes,
                                                   s->grouped);
  PKB_LAUNCH(ctx);
  if (all_to_all_one(ctx, send_counts, recv_counts) || to_host(ctx, s, 0)) return 1;
  const int64_t f = sum(s->host, W), R = sum(s->host + W, W);
  if (f > s->fr_cap || R > s->req_cap)
    PKB_FAIL_(ctx, "hop", "frontier larger than pkb_init sized (are the seeds distinct?)");
  // 3. The frontier to its owners.
  if (all_to_all_v(ctx, s->send_nodes, s->host, s->recv_nodes, s->host + W)) return 1;
  // 4. Owner-side sampling of what arrived, and the totals per requester.
  count_samples<<<blocks_for(R + 1), 256, 0, ctx->stream>>>(s->recv_nodes, R, row_ptr, k, s->samp_counts);
  PKB_LAUNCH(ctx);
  if (scan(ctx, s, s->samp_counts, s->samp_off, R + 1)) return 1;
  write_samples<<<blocks_for(R * k), 256, 0, ctx->stream>>>(s->recv_nodes, R, row_ptr, col, k, s->samp_counts,
                                                            s->samp_off, s->samp_nodes, s->samp_edges);
  per_requester_totals<<<1, 32, 0, ctx->stream>>>(recv_counts, W, s->samp_off, send_node_counts);
  PKB_LAUNCH(ctx);
  // 5. The totals to the requesters and to the host.
  if (all_to_all_one(ctx, send_node_counts, reply_node_counts) || to_host(ctx, s, 2 * W)) return 1;
  const int64_t T = sum(s->host + 3 * W, W);
  if (*edges + T > s->ecap) PKB_FAIL_(ctx, "hop", "more sampled edges than ECAP");
  // 6. The replies: ids and edge ids by the totals, per-node counts by the request counts.
  PKB_NCCL(ctx, ncclGroupStart());
  if (all_to_all_v(ctx, s->samp_nodes, s->host + 2 * W, s->reply_nodes, s->host + 3 * W) ||
      all_to_all_v(ctx, s->samp_edges, s->host + 2 * W, s->reply_edges, s->host + 3 * W) ||
      all_to_all_v(ctx, s->samp_counts, s->host + W, s->reply_counts, s->host))
    return 1;
  PKB_NCCL(ctx, ncclGroupEnd());
  // 7. Back to frontier order, appended to the edge list.
  order_counts<<<blocks_for(f + 1), 256, 0, ctx->stream>>>(s->grouped, f, s->reply_counts, s->ord_counts);
  PKB_LAUNCH(ctx);
  if (scan(ctx, s, s->reply_counts, s->reply_off, f + 1) || scan(ctx, s, s->ord_counts, s->ord_off, f + 1)) return 1;
  reorder_replies<<<blocks_for(f * k), 256, 0, ctx->stream>>>(fr, f, k, s->grouped, s->reply_counts, s->reply_off,
                                                              s->ord_off, s->reply_nodes, s->reply_edges, *edges,
                                                              s->nbr, s->dst, edge);
  PKB_LAUNCH(ctx);
  // 8. New nodes by first occurrence: appended to node, the next frontier.
  const int64_t* hop_nbr = s->nbr + *edges;
  PKB_CUDA(ctx, cudaMemsetAsync(s->first, 0xff, (size_t)s->n * sizeof(unsigned long long), ctx->stream));
  first_occurrence<<<blocks_for(T), 256, 0, ctx->stream>>>(hop_nbr, T, s->table, s->first);
  flag_new<<<blocks_for(T + 1), 256, 0, ctx->stream>>>(hop_nbr, T, s->table, s->first, s->flags);
  PKB_LAUNCH(ctx);
  if (scan(ctx, s, s->flags, s->flag_off, T + 1)) return 1;
  append_new<<<blocks_for(T), 256, 0, ctx->stream>>>(hop_nbr, T, s->flags, s->flag_off, s->sizes, s->fr_cap, node,
                                                     s->table, next);
  advance_sizes<<<1, 32, 0, ctx->stream>>>(s->flag_off, T, s->sizes);
  PKB_LAUNCH(ctx);
  *edges += T;
  return 0;
}

template <typename T>
int alloc(pkb_context* ctx, T** p, int64_t n) {
  PKB_CUDA(ctx, cudaMalloc(p, (size_t)(n > 0 ? n : 1) * sizeof(T)));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  s->W = ctx->world;
  s->n = ctx->param(ctx, "num_nodes", 0);
  s->S = ctx->param(ctx, "S", 0);
  s->ncap = ctx->param(ctx, "NCAP", 0);
  s->ecap = ctx->param(ctx, "ECAP", 0);
  s->fanout[0] = ctx->param(ctx, "F1", 0);
  s->fanout[1] = ctx->param(ctx, "F2", 0);
  if (s->W > kMaxWorld) PKB_FAIL_(ctx, "pkb_init", "more ranks than the partition kernel's counters hold");
  if (s->n <= 0 || s->S <= 0 || s->fanout[0] <= 0 || s->fanout[1] <= 0)
    PKB_FAIL_(ctx, "pkb_init", "need num_nodes, S, F1, F2 > 0");
  s->fmax = s->fanout[0] > s->fanout[1] ? s->fanout[0] : s->fanout[1];
  const int64_t hop2 = s->n - s->S < s->S * s->fanout[0] ? s->n - s->S : s->S * s->fanout[0];
  s->fr_cap = s->S > hop2 ? s->S : hop2;
  s->req_cap = s->W * s->fr_cap;
  if (s->req_cap * s->fmax >= (1LL << 31)) PKB_FAIL_(ctx, "pkb_init", "the CUB scans take 32-bit sizes");
  if (alloc(ctx, &s->frontier[0], s->fr_cap) || alloc(ctx, &s->frontier[1], s->fr_cap) ||
      alloc(ctx, &s->send_nodes, s->fr_cap) || alloc(ctx, &s->grouped, s->fr_cap) || alloc(ctx, &s->counts, 4 * s->W) ||
      alloc(ctx, &s->recv_nodes, s->req_cap) || alloc(ctx, &s->samp_counts, s->req_cap + 1) ||
      alloc(ctx, &s->samp_off, s->req_cap + 1) || alloc(ctx, &s->samp_nodes, s->req_cap * s->fmax) ||
      alloc(ctx, &s->samp_edges, s->req_cap * s->fmax) || alloc(ctx, &s->reply_nodes, s->fr_cap * s->fmax) ||
      alloc(ctx, &s->reply_edges, s->fr_cap * s->fmax) || alloc(ctx, &s->reply_counts, s->fr_cap + 1) ||
      alloc(ctx, &s->reply_off, s->fr_cap + 1) || alloc(ctx, &s->ord_counts, s->fr_cap + 1) ||
      alloc(ctx, &s->ord_off, s->fr_cap + 1) || alloc(ctx, &s->nbr, s->ecap) || alloc(ctx, &s->dst, s->ecap) ||
      alloc(ctx, &s->table, s->n) || alloc(ctx, &s->first, s->n) || alloc(ctx, &s->flags, s->fr_cap * s->fmax + 1) ||
      alloc(ctx, &s->flag_off, s->fr_cap * s->fmax + 1) || alloc(ctx, &s->sizes, 2))
    return 1;
  PKB_CUDA(ctx, cudaMallocHost(&s->host, 4 * s->W * sizeof(int64_t)));
  // Workspace for a scan of req_cap fmax + 1 items, more than any scan here takes (scan() checks).
  PKB_CUDA(ctx, cub::DeviceScan::ExclusiveSum(nullptr, s->cub_bytes, s->samp_counts, s->samp_off,
                                              (int)(s->req_cap * s->fmax + 1), ctx->stream));
  PKB_CUDA(ctx, cudaMalloc(&s->cub_temp, s->cub_bytes ? s->cub_bytes : 1));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in: seed_nodes [S], local_adj_row_ptr [n + 1], local_adj_col [n DEG], node_to_rank [n] (int64);
  // out: node [NCAP], row, col, edge [ECAP], sizes [2] (int64).
  State* s = static_cast<State*>(ctx->user);
  if (in[0].shape[0] != s->S || in[1].shape[0] != s->n + 1 || in[3].shape[0] != s->n || out[0].shape[0] != s->ncap ||
      out[1].shape[0] != s->ecap)
    PKB_FAIL_(ctx, "pkb_run", "the tensors are not the shapes pkb_init sized for (S, num_nodes, NCAP, ECAP)");
  const int64_t* seeds = static_cast<const int64_t*>(in[0].data);
  int64_t* node = static_cast<int64_t*>(out[0].data);
  int64_t* row = static_cast<int64_t*>(out[1].data);
  int64_t* col = static_cast<int64_t*>(out[2].data);
  int64_t* edge = static_cast<int64_t*>(out[3].data);
  // -1 everywhere past the sizes; the node table empty, then holding the seeds.
  PKB_CUDA(ctx, cudaMemsetAsync(node, 0xff, (size_t)s->ncap * sizeof(int64_t), ctx->stream));
  for (int o = 1; o <= 3; ++o)
    PKB_CUDA(ctx, cudaMemsetAsync(out[o].data, 0xff, (size_t)s->ecap * sizeof(int64_t), ctx->stream));
  PKB_CUDA(ctx, cudaMemsetAsync(s->table, 0xff, (size_t)s->n * sizeof(int64_t), ctx->stream));
  start_from_seeds<<<blocks_for(s->S), 256, 0, ctx->stream>>>(seeds, s->S, node, s->table, s->sizes);
  PKB_LAUNCH(ctx);
  int64_t edges = 0;
  const int64_t* fr = seeds;
  for (int h = 0; h < kHops; ++h) {
    int64_t* next = s->frontier[h % 2];
    if (hop(ctx, s, fr, s->fanout[h], in, node, edge, &edges, next)) return 1;
    fr = next;
  }
  relabel<<<blocks_for(edges), 256, 0, ctx->stream>>>(s->nbr, s->dst, edges, s->table, s->sizes, row, col,
                                                      static_cast<int64_t*>(out[4].data));
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  void* device[] = {s->frontier[0], s->frontier[1], s->send_nodes, s->grouped, s->counts, s->recv_nodes,
                    s->samp_counts, s->samp_off, s->samp_nodes, s->samp_edges, s->reply_nodes, s->reply_edges,
                    s->reply_counts, s->reply_off, s->ord_counts, s->ord_off, s->nbr, s->dst, s->table, s->first,
                    s->flags, s->flag_off, s->sizes, s->cub_temp};
  for (void* p : device) PKB_CUDA(ctx, cudaFree(p));
  PKB_CUDA(ctx, cudaFreeHost(s->host));
  delete s;
  ctx->user = nullptr;
  return 0;
}
