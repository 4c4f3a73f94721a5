// Baseline for problem 29 (MoE combine around the all-to-all: VeOmni's tokens_post_all2all). PKB's
// PyTorch, in order, and what stands for each op here (all on ctx->stream):
//   1. _sort_chunks_by_idxs: torch.split of expert_outputs by num_global_tokens_per_local_expert.T
//      (chunk l W + i holds [i][l] rows; .tolist() is a host sync), torch.cat in the order
//      arange(E).reshape(L, W).T.ravel()            -> move_chunks. At L = 1 (W = 8) the order is
//                                                       the identity: the rows are sent as they are;
//   2. all_to_all_single with the splits swapped (output_splits[j] rows to rank j, input_splits[j]
//      from it; PKB passes Python lists)            -> grouped ncclSend / ncclRecv at the prefix
//                                                       offsets, empty splits skipped;
//   3. weights_idx = zeros [M, E] scatter_add_ of routing_weights at selected_experts
//                                                    -> weight_table (one row per thread, in D);
//   4. routing_weights.T.masked_select(routing_map) (nonzero: its size reaches the host)
//                                                    -> count_tiles + scan_tiles before the host
//                                                       sync, gather_weights after it;
//   5. tokens * tokens_weight[:, None] (rounded to D) -> scale_rows, in place on the received rows;
//   6. zeros [M, N] scatter_add_ along the mapping   -> a memset and scatter_rows (atomicAdd in D,
//                                                       as torch's CUDA scatter_add; two terms per
//                                                       token from zero, so the order is moot).
// The host syncs once: the splits, the chunk sizes and the routing map's count are copied together.
// PKB's checks are kept: the chunk sizes, both splits and the count must all add up to K M (torch
// raises otherwise). Scratch is sized in pkb_init from the spec's M, N and R.
#include <pkb/solution.h>

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

namespace {

constexpr int kTile = 1024;     // routing-map entries per scan block (one per thread)
constexpr int kMaxChunks = 64;  // W L = E chunks; the baseline handles E <= 64
constexpr int kRowThreads = 128;

// ---- element type helpers -------------------------------------------------------------------

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// ---- kernels ----------------------------------------------------------------------------------

/// Purpose: tile_counts[b] = the true entries of tile b (kTile consecutive entries of the row-major
/// routing map). Approach: one block per tile, a block-wide sum.
__global__ void __launch_bounds__(kTile) count_tiles(const uint8_t* __restrict__ routing_map, long long entries,
                                                     int* __restrict__ tile_counts) {
  using Scan = cub::BlockScan<int, kTile>;
  __shared__ typename Scan::TempStorage tmp;
  long long i = blockIdx.x * (long long)kTile + threadIdx.x;
  int flag = i < entries && routing_map[i] != 0 ? 1 : 0;
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

/// Purpose: table[t][e] = the sum in D, from 0, of routing_weights[t][k] over the k with
/// selected[t][k] = e (scatter_add_ into zeros); experts outside [0, E) are skipped.
/// Approach: one thread per token, the slots in order.
template <typename T>
__global__ void weight_table(const T* __restrict__ weights, const long long* __restrict__ selected, T* __restrict__ table,
                             long long tokens, int slots, int experts) {
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  T* row = table + t * experts;
  for (int e = 0; e < experts; ++e) row[e] = from_f<T>(0.0f);
  for (int k = 0; k < slots; ++k) {
    long long e = selected[t * slots + k];
    if (e >= 0 && e < experts) row[e] = from_f<T>(to_f(row[e]) + to_f(weights[t * slots + k]));
  }
}

/// Purpose: tokens_weight[tile_offsets[b] + (true entries before i in tile b)] = table[t][e] for
/// every true entry i = e M + t: masked_select of the transposed table by the routing map.
/// Requires: the total checked against tokens_weight's length first (it is never written past).
template <typename T>
__global__ void __launch_bounds__(kTile) gather_weights(const uint8_t* __restrict__ routing_map, long long entries,
                                                        long long tokens, int experts, const int* __restrict__ tile_offsets,
                                                        const T* __restrict__ table, T* __restrict__ tokens_weight) {
  using Scan = cub::BlockScan<int, kTile>;
  __shared__ typename Scan::TempStorage tmp;
  long long i = blockIdx.x * (long long)kTile + threadIdx.x;
  int flag = i < entries && routing_map[i] != 0 ? 1 : 0;
  int before, total;
  Scan(tmp).ExclusiveSum(flag, before, total);
  if (flag) {
    long long e = i / tokens, t = i % tokens;
    tokens_weight[tile_offsets[blockIdx.x] + before] = table[t * experts + e];
  }
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

/// Purpose: rows[p][c] = D(rows[p][c] * tokens_weight[p]) in place (torch's broadcast multiply,
/// computed in fp32). Approach: grid-stride over the elements.
template <typename T>
__global__ void scale_rows(T* __restrict__ rows, const T* __restrict__ tokens_weight, long long n_rows, long long cols) {
  const long long n = n_rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    rows[i] = from_f<T>(to_f(rows[i]) * to_f(tokens_weight[i / cols]));
}

/// Purpose: out[mapping[p]][c] += rows[p][c] (scatter_add_ along dim 0; atomics in D, as torch's
/// CUDA kernel). Approach: one block per row p; a mapping outside [0, M) is skipped.
template <typename T>
__global__ void scatter_rows(const T* __restrict__ rows, const long long* __restrict__ mapping, T* __restrict__ out,
                             long long tokens, long long cols) {
  const long long p = blockIdx.x, t = mapping[p];
  if (t < 0 || t >= tokens) return;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) atomicAdd(out + t * cols + c, rows[p * cols + c]);
}

// ---- state ------------------------------------------------------------------------------------

struct Scratch {
  int experts = 0, local = 0, tiles = 0;
  long long tokens = 0, hidden = 0, rows = 0;  // M, N, R = K M
  int* tile_counts = nullptr;   // [tiles]
  int* tile_offsets = nullptr;  // [tiles]
  long long* count = nullptr;   // [1] true routing-map entries
  long long* host = nullptr;    // pinned: input splits [W], output splits [W], chunk sizes [W L], count [1]
  char* send = nullptr;         // [R, N] expert outputs by source rank (L > 1 only)
  char* recv = nullptr;         // [R, N] returned rows, then scaled in place
  void* table = nullptr;        // [M, E] D: weights_idx
  void* tokens_weight = nullptr;  // [R] D
};

void free_scratch(Scratch* s) {
  for (void* p : {(void*)s->tile_counts, (void*)s->tile_offsets, (void*)s->count, (void*)s->send, (void*)s->recv,
                  s->table, s->tokens_weight})
    if (p) cudaFree(p);
  if (s->host) cudaFreeHost(s->host);
  delete s;
}

int grid_for(long long n, int threads = 256) {
  long long b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

template <typename T>
int run(pkb_context* ctx, Scratch* s, const pkb_tensor* in, pkb_tensor* out) {
  const pkb_tensor &y = in[0], &weights = in[1], &selected = in[2], &routing = in[6], &mapping = in[7];
  const int W = ctx->world, E = s->experts, L = s->local;
  const long long R = y.shape[0], N = y.shape[1], M = out[0].shape[0];
  if (R != s->rows || N != s->hidden || M != s->tokens || weights.shape[0] != M || selected.shape[0] != M ||
      routing.shape[0] != E || routing.shape[1] != M || mapping.shape[0] != R)
    PKB_FAIL_(ctx, "pkb_run", "shapes differ from the ones pkb_init sized for");
  const int K = static_cast<int>(weights.shape[1]);
  const long long entries = E * M;
  const size_t row_bytes = N * sizeof(T);
  const uint8_t* map_flags = static_cast<const uint8_t*>(routing.data);
  cudaStream_t st = ctx->stream;

  // 4a. True routing-map entries per tile, the tiles' offsets and the total (masked_select's size).
  count_tiles<<<s->tiles, kTile, 0, st>>>(map_flags, entries, s->tile_counts);
  PKB_LAUNCH(ctx);
  scan_tiles<<<1, kTile, 0, st>>>(s->tile_counts, s->tiles, s->tile_offsets, s->count);
  PKB_LAUNCH(ctx);

  // Splits, chunk sizes and the count on the host, then PKB's checks.
  long long* h = s->host;
  PKB_CUDA(ctx, cudaMemcpyAsync(h, in[3].data, W * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + W, in[4].data, W * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + 2 * W, in[5].data, E * sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaMemcpyAsync(h + 2 * W + E, s->count, sizeof(long long), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  const long long* back = h;           // input_splits: rows received back from each rank
  const long long* away = h + W;       // output_splits: rows sent back to each rank
  const long long* chunk = h + 2 * W;  // [i][l]: the rows of chunk l W + i
  const long long count = h[2 * W + E];
  std::vector<long long> back_off(W + 1, 0), away_off(W + 1, 0);
  for (int j = 0; j < W; ++j) {
    if (back[j] < 0 || away[j] < 0) PKB_FAIL_(ctx, "pkb_run", "negative split size");
    back_off[j + 1] = back_off[j] + back[j];
    away_off[j + 1] = away_off[j] + away[j];
  }
  long long chunk_total = 0;
  for (int c = 0; c < E; ++c) {
    if (chunk[c] < 0) PKB_FAIL_(ctx, "pkb_run", "negative chunk size");
    chunk_total += chunk[c];
  }
  if (chunk_total != R || away_off[W] != R || back_off[W] != R || count != R)
    PKB_FAIL_(ctx, "pkb_run", "the chunk sizes, both splits and the routing map's entries must all add up to K M");

  // 1. Chunk l W + i (consecutive in expert_outputs) goes to position i L + l.
  const char* source = static_cast<const char*>(y.data);
  if (L > 1) {
    ChunkMap map{};
    map.chunks = E;
    std::vector<long long> src_off(E + 1, 0);  // by chunk l W + i, whose size is chunk[i L + l]
    for (int l = 0, c = 0; l < L; ++l)
      for (int i = 0; i < W; ++i, ++c) src_off[c + 1] = src_off[c] + chunk[i * L + l];
    long long dst = 0;
    for (int i = 0, p = 0; i < W; ++i)
      for (int l = 0; l < L; ++l, ++p) {
        map.src[p] = src_off[l * W + i];
        map.dst[p] = dst;
        map.rows[p] = chunk[i * L + l];
        dst += chunk[i * L + l];
      }
    move_chunks<<<static_cast<unsigned>(R), kRowThreads, 0, st>>>(source, s->send, map, row_bytes);
    PKB_LAUNCH(ctx);
    source = s->send;
  }

  // 2. All-to-all back to the tokens' ranks.
  const ncclDataType_t nt = pkb_nccl_dtype(ctx->dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    if (away[j] > 0) PKB_NCCL(ctx, ncclSend(source + away_off[j] * row_bytes, away[j] * N, nt, j, ctx->comm, st));
    if (back[j] > 0) PKB_NCCL(ctx, ncclRecv(s->recv + back_off[j] * row_bytes, back[j] * N, nt, j, ctx->comm, st));
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 3. The dense weight table, 4b. each routed row's weight in routing-map order.
  weight_table<T><<<grid_for(M, 128), 128, 0, st>>>(static_cast<const T*>(weights.data),
                                                    static_cast<const long long*>(selected.data),
                                                    static_cast<T*>(s->table), M, K, E);
  PKB_LAUNCH(ctx);
  gather_weights<T><<<s->tiles, kTile, 0, st>>>(map_flags, entries, M, E, s->tile_offsets,
                                                static_cast<const T*>(s->table), static_cast<T*>(s->tokens_weight));
  PKB_LAUNCH(ctx);

  // 5. Weighted rows, 6. scatter-added into zeros.
  T* rows = reinterpret_cast<T*>(s->recv);
  scale_rows<T><<<grid_for(R * N), 256, 0, st>>>(rows, static_cast<const T*>(s->tokens_weight), R, N);
  PKB_LAUNCH(ctx);
  PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0, M * row_bytes, st));  // all-zero bits are +0 in every D
  scatter_rows<T><<<static_cast<unsigned>(R), 256, 0, st>>>(rows, static_cast<const long long*>(mapping.data),
                                                             static_cast<T*>(out[0].data), M, N);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  if (ctx->dtype != PKB_BF16 && ctx->dtype != PKB_FP16 && ctx->dtype != PKB_FP32)
    PKB_FAIL_(ctx, "pkb_init", "dtype must be bf16, fp16 or fp32");
  s->experts = static_cast<int>(ctx->param(ctx, "E", 8));
  s->tokens = ctx->param(ctx, "M", 0);
  s->hidden = ctx->param(ctx, "N", 0);
  s->rows = ctx->param(ctx, "R", 0);
  if (s->experts > kMaxChunks || s->experts % ctx->world != 0)
    PKB_FAIL_(ctx, "pkb_init", "the experts (at most 64) must divide evenly over the ranks");
  if (s->tokens <= 0 || s->hidden <= 0 || s->rows <= 0) PKB_FAIL_(ctx, "pkb_init", "size parameters M, N and R are missing");
  s->local = s->experts / ctx->world;
  s->tiles = static_cast<int>((s->experts * s->tokens + kTile - 1) / kTile);
  const size_t e = pkb_dtype_size(ctx->dtype);
  const size_t bytes = static_cast<size_t>(s->rows) * s->hidden * e;
  const int W = ctx->world;
  PKB_CUDA(ctx, cudaMalloc(&s->tile_counts, s->tiles * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->tile_offsets, s->tiles * sizeof(int)));
  PKB_CUDA(ctx, cudaMalloc(&s->count, sizeof(long long)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host, (2 * W + s->experts + 1) * sizeof(long long)));
  if (s->local > 1) PKB_CUDA(ctx, cudaMalloc(&s->send, bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->recv, bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->table, static_cast<size_t>(s->tokens) * s->experts * e));
  PKB_CUDA(ctx, cudaMalloc(&s->tokens_weight, static_cast<size_t>(s->rows) * e));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, s, in, out);
    case PKB_FP16: return run<__half>(ctx, s, in, out);
    default: return run<float>(ctx, s, in, out);
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  if (ctx->user) free_scratch(static_cast<Scratch*>(ctx->user));
  ctx->user = nullptr;
  return 0;
}
