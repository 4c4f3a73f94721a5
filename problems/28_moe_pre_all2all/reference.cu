// Baseline for problem 28 (MoE dispatch around the all-to-all: VeOmni's token_pre_all2all). PKB's
// PyTorch, in order, and what stands for each op here (all on ctx->stream):
//   1. routing_map = expert_mask.sum(dim=1)            -> sum_slots (fp32, the slots in order);
//   2. masked_select of the token ids by routing_map     -> count_tiles + scan_tiles (the number of
//      (PyTorch's nonzero, whose size reaches the host)     nonzero entries and each tile's offset),
//                                                           then write_mapping (ids, expert-major);
//   3. index_select of the token rows                    -> gather_rows;
//   4. the "EP split mismatch" check (sum of input_splits against the permuted rows) and the split
//      lists on the host (PKB passes Python lists; its later .tolist() of the chunk sizes is a
//      second host sync)                                 -> one copy of the splits, the chunk sizes
//                                                           and the count to pinned memory, one
//                                                           stream synchronize;
//   5. all_to_all_single with split sizes                -> grouped ncclSend / ncclRecv per peer at
//                                                           the prefix offsets, empty splits skipped
//                                                           (PyTorch's unequal-split all-to-all);
//   6. _sort_chunks_by_idxs: torch.split by the W L chunk sizes, torch.cat in the order
//      arange(E).reshape(W, L).T.ravel()               -> move_chunks. At L = 1 (W = 8) that order
//                                                           is the identity, so the all-to-all
//                                                           receives into the output directly.
// PKB's fourth return value, the torch.Size of hidden_states, is not an output. Scratch is sized in
// pkb_init from the spec's M and N.
#include <pkb/solution.h>

#include <cub/block/block_scan.cuh>

#include <vector>

namespace {

constexpr int kTile = 1024;      // routing-map entries per scan block (one per thread)
constexpr int kMaxChunks = 64;   // W L = E chunks; the baseline handles E <= 64
constexpr int kRowThreads = 128;

// ---- kernels ----------------------------------------------------------------------------------

/// Purpose: routing_map[e][t] = sum over k of mask[e][k][t] (torch's sum over dim 1, in fp32).
/// Approach: one thread per (e, t); the K slots added in order from 0.
__global__ void sum_slots(const float* __restrict__ mask, float* __restrict__ routing_map, int slots, long long tokens,
                          long long entries) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < entries; i += (long long)gridDim.x * blockDim.x) {
    long long e = i / tokens, t = i % tokens;
    const float* col = mask + e * slots * tokens + t;
    float s = 0.0f;
    for (int k = 0; k < slots; ++k) s += col[k * tokens];
    routing_map[i] = s;
  }
}

/// Purpose: tile_counts[b] = the nonzero entries of tile b (kTile consecutive entries of the
/// row-major routing map). Approach: one block per tile, a block-wide sum.
__global__ void __launch_bounds__(kTile) count_tiles(const float* __restrict__ routing_map, long long entries,
                                                     int* __restrict__ tile_counts) {
  using Scan = cub::BlockScan<int, kTile>;
  __shared__ typename Scan::TempStorage tmp;
  long long i = blockIdx.x * (long long)kTile + threadIdx.x;
  int flag = i < entries && routing_map[i] != 0.0f ? 1 : 0;
  int before, total;
  Scan(tmp).ExclusiveSum(flag, before, total);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

/// Purpose: tile_offsets = the exclusive prefix sum of tile_counts, and *count their total.
/// Approach: one block, the tiles walked kTile at a time with a carry.
__global__ void __launch_bounds__(kTile) scan_tiles(const int* __restrict__ tile_counts, int tiles,
                                                    int* __restrict__ tile_offsets, long long* __restrict__ count) {
  using Scan = cub::BlockScan<int, kTile>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < tiles; base += kTile) {
    int b = base + threadIdx.x;
    int c = b < tiles ? tile_counts[b] : 0;
    int before, total;
    Scan(tmp).ExclusiveSum(c, before, total);
    if (b < tiles) tile_offsets[b] = carry + before;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = carry;
}

/// Purpose: mapping[tile_offsets[b] + (nonzero entries before i in tile b)] = i % tokens for every
/// nonzero entry i: the token ids in expert-major order (masked_select of the expanded arange).
/// Requires: the total checked against the mapping's length first (it is never written past).
__global__ void __launch_bounds__(kTile) write_mapping(const float* __restrict__ routing_map, long long entries,
                                                       long long tokens, const int* __restrict__ tile_offsets,
                                                       long long* __restrict__ mapping) {
  using Scan = cub::BlockScan<int, kTile>;
  __shared__ typename Scan::TempStorage tmp;
  long long i = blockIdx.x * (long long)kTile + threadIdx.x;
  int flag = i < entries && routing_map[i] != 0.0f ? 1 : 0;
  int before, total;
  Scan(tmp).ExclusiveSum(flag, before, total);
  if (flag) mapping[tile_offsets[blockIdx.x] + before] = i % tokens;
}

/// Copies one row of `bytes` bytes (a multiple of 2) with the block's threads; 16-byte vectors when
/// the row size allows (rows start at multiples of it from 256-byte aligned bases).
__device__ __forceinline__ void copy_row(char* dst, const char* src, size_t bytes) {
  if (bytes % 16 == 0) {
    auto* d = reinterpret_cast<uint4*>(dst);
    auto* s = reinterpret_cast<const uint4*>(src);
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
  } else {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    auto* s = reinterpret_cast<const uint16_t*>(src);
    for (size_t i = threadIdx.x; i < bytes / 2; i += blockDim.x) d[i] = s[i];
  }
}

/// Purpose: send[p] = x[mapping[p]] (index_select). Approach: one block per permuted row.
__global__ void gather_rows(const char* __restrict__ x, const long long* __restrict__ mapping, char* __restrict__ send,
                            size_t row_bytes) {
  long long p = blockIdx.x;
  copy_row(send + p * row_bytes, x + mapping[p] * row_bytes, row_bytes);
}

/// Where each chunk goes: chunk c of `rows[c]` rows moves from row src[c] to row dst[c].
struct ChunkMap {
  long long src[kMaxChunks], dst[kMaxChunks], rows[kMaxChunks];
  int chunks;
};

/// Purpose: the chunk reorder (split + cat). Approach: one block per destination row, which finds
/// its chunk among at most kMaxChunks (empty chunks never match).
__global__ void move_chunks(const char* __restrict__ src, char* __restrict__ dst, ChunkMap map, size_t row_bytes) {
  long long row = blockIdx.x;
  for (int c = 0; c < map.chunks; ++c)
    if (row >= map.dst[c] && row < map.dst[c] + map.rows[c]) {
      copy_row(dst + row * row_bytes, src + (map.src[c] + row - map.dst[c]) * row_bytes, row_bytes);
      return;
    }
}

// ---- state ------------------------------------------------------------------------------------

struct Scratch {
  int experts = 0, local = 0, tiles = 0;
  long long tokens = 0, hidden = 0, rows = 0;  // M, N, R = K M
  int* tile_counts = nullptr;   // [tiles]
  int* tile_offsets = nullptr;  // [tiles]
  long long* count = nullptr;   // [1] nonzero routing-map entries
  long long* host = nullptr;    // pinned: input splits [W], output splits [W], chunk sizes [W L], count [1]
  char* send = nullptr;         // [R, N] permuted rows
  char* recv = nullptr;         // [R, N] received rows (L > 1 only)
};

void free_scratch(Scratch* s) {
  for (void* p : {(void*)s->tile_counts, (void*)s->tile_offsets, (void*)s->count, (void*)s->send, (void*)s->recv})
    if (p) cudaFree(p);
  if (s->host) cudaFreeHost(s->host);
  delete s;
}

int grid_for(long long n, int threads = 256) {
  long long b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  s->experts = static_cast<int>(ctx->param(ctx, "E", 8));
  s->tokens = ctx->param(ctx, "M", 0);
  s->hidden = ctx->param(ctx, "N", 0);
  s->rows = ctx->param(ctx, "R", 0);
  if (s->experts > kMaxChunks || s->experts % ctx->world != 0)
    PKB_FAIL_(ctx, "pkb_init", "the experts (at most 64) must divide evenly over the ranks");
  if (s->tokens <= 0 || s->hidden <= 0 || s->rows <= 0) PKB_FAIL_(ctx, "pkb_init", "size parameters M, N and R are missing");
  s->local = s->experts / ctx->world;
  s->tiles = static_cast<int>((s->experts * s->tokens + kTile - 1) / kTile);
  const size_t bytes = static_cast<size_t>(s->rows) * s->hidden * pkb_dtype_size(ctx->dtype);
  const int W = ctx->world;
  PKB_CUDA(ctx, cudaMalloc(&s->tile_counts, s->tiles * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->tile_offsets, s->tiles * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->count, sizeof(long long)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host, (2 * W + s->experts + 1) * sizeof(long long)));
  PKB_CUDA(ctx, cudaMalloc(&s->send, bytes));
  if (s->local > 1) PKB_CUDA(ctx, cudaMalloc(&s->recv, bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  const pkb_tensor &x = in[0], &mask = in[1];
  const int W = ctx->world, E = s->experts, L = s->local;
  const long long M = x.shape[0], N = x.shape[1], R = out[0].shape[0];
  if (M != s->tokens || N != s->hidden || R != s->rows || mask.dtype != PKB_FP32 || mask.ndim != 3 ||
      mask.shape[0] != E || mask.shape[2] != M)
    PKB_FAIL_(ctx, "pkb_run", "shapes differ from the ones pkb_init sized for (hidden_states [M, N], expert_mask fp32 [E, K, M])");
  const int K = static_cast<int>(mask.shape[1]);
  const long long entries = E * M;
  const size_t row_bytes = N * pkb_dtype_size(x.dtype);
  cudaStream_t st = ctx->stream;
  float* routing_map = static_cast<float*>(out[1].data);
  long long* mapping = static_cast<long long*>(out[2].data);

  // 1. Routing map.
  sum_slots<<<grid_for(entries), 256, 0, st>>>(static_cast<const float*>(mask.data), routing_map, K, M, entries);
  PKB_LAUNCH(ctx);
  // 2a. Nonzero entries per tile, the tiles' offsets and the total.
  count_tiles<<<s->tiles, kTile, 0, st>>>(routing_map, entries, s->tile_counts);
  PKB_LAUNCH(ctx);
  scan_tiles<<<1, kTile, 0, st>>>(s->tile_counts, s->tiles, s->tile_offsets, s->count);
  PKB_LAUNCH(ctx);

  // 4. Splits, chunk sizes and the count on the host, then PKB's checks.
  long long* h = s->host;
  PKB_CUDA(ctx, cudaMemcpyAsync(h, in[2].data, W * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + W, in[3].data, W * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + 2 * W, in[4].data, E * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + 2 * W + E, s->count, sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  const long long* send = h;           // rows to each rank
  const long long* recv = h + W;       // rows from each rank
  const long long* chunk = h + 2 * W;  // chunk i L + l of the received rows
  const long long count = h[2 * W + E];
  std::vector<long long> send_off(W + 1, 0), recv_off(W + 1, 0);
  for (int j = 0; j < W; ++j) {
    if (send[j] < 0 || recv[j] < 0) PKB_FAIL_(ctx, "pkb_run", "negative split size");
    send_off[j + 1] = send_off[j] + send[j];
    recv_off[j + 1] = recv_off[j] + recv[j];
  }
  long long chunk_total = 0;
  for (int c = 0; c < E; ++c) {
    if (chunk[c] < 0) PKB_FAIL_(ctx, "pkb_run", "negative chunk size");
    chunk_total += chunk[c];
  }
  if (send_off[W] != count) PKB_FAIL_(ctx, "pkb_run", "EP split mismatch: the input splits do not add up to the permuted tokens");
  if (count != R || recv_off[W] != R || chunk_total != R)
    PKB_FAIL_(ctx, "pkb_run", "the permuted rows, the output splits and the chunk sizes must all add up to K M");

  // 2b. The permutation (expert-major token ids), 3. the permuted rows.
  write_mapping<<<s->tiles, kTile, 0, st>>>(routing_map, entries, M, s->tile_offsets, mapping);
  PKB_LAUNCH(ctx);
  gather_rows<<<static_cast<unsigned>(R), kRowThreads, 0, st>>>(static_cast<const char*>(x.data), mapping, s->send,
                                                                 row_bytes);
  PKB_LAUNCH(ctx);

  // 5. All-to-all. At L = 1 the chunk order is the identity: receive into the output.
  char* dest = L > 1 ? s->recv : static_cast<char*>(out[0].data);
  const ncclDataType_t nt = pkb_nccl_dtype(x.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    if (send[j] > 0) PKB_NCCL(ctx, ncclSend(s->send + send_off[j] * row_bytes, send[j] * N, nt, j, ctx->comm, st));
    if (recv[j] > 0) PKB_NCCL(ctx, ncclRecv(dest + recv_off[j] * row_bytes, recv[j] * N, nt, j, ctx->comm, st));
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 6. Chunk i L + l (consecutive in the received rows) goes to position l W + i.
  if (L > 1) {
    ChunkMap map{};
    map.chunks = E;
    std::vector<long long> src_off(E + 1, 0);
    for (int c = 0; c < E; ++c) src_off[c + 1] = src_off[c] + chunk[c];
    long long dst = 0;
    for (int l = 0, p = 0; l < L; ++l)
      for (int i = 0; i < W; ++i, ++p) {
        const int c = i * L + l;
        map.src[p] = src_off[c];
        map.dst[p] = dst;
        map.rows[p] = chunk[c];
        dst += chunk[c];
      }
    move_chunks<<<static_cast<unsigned>(R), kRowThreads, 0, st>>>(s->recv, static_cast<char*>(out[0].data), map,
                                                                   row_bytes);
    PKB_LAUNCH(ctx);
  }
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  if (ctx->user) free_scratch(static_cast<Scratch*>(ctx->user));
  ctx->user = nullptr;
  return 0;
}
