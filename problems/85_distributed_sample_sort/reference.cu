// Baseline for problem 85 (distributed sample sort). PKB's solution(), step by step, with the same
// collectives (PyTorch's NCCL all_gather and all_to_all_single, the latter a group of ncclSend /
// ncclRecv, as here):
//   1. sort the shard (torch.sort: a radix sort, CUB's here);
//   2. all-gather the shard sizes (int64) and read them on the host; the A non-empty ranks are
//      "active", numbered in rank order (sort_rank);
//   3. A regular samples per active rank: positions (i + 1) n / A - 1 when A < n, else 0 .. n - 1,
//      padded with (+inf, -1, -1); three all-gathers (values, sort ranks, positions), read on the host;
//   4. on the host: the samples of rank >= 0 sorted by (value, rank, position); splitter s = sample
//      (s + 1) U / A - 1 of the U usable ones, s = 0 .. A - 2;
//   5. bucket boundaries by searchsorted (left when this sort rank is above the splitter's, right when
//      below, the splitter's position + 1 when it is the splitter's own rank), each at least the one
//      before; bucket b goes to the b-th active rank. The send counts are exchanged (an all-to-all of
//      W int64) and read on the host;
//   6. the variable all-to-all of the buckets; 7. sort of everything received (torch.cat + sort);
//   8. exact rebalancing: all-gather of the merged sizes; each rank sends the overlap of its merged
//      range with every rank's target range [r base + min(r, extra), + base + (r < extra)); counts
//      exchanged and read on the host, then the variable all-to-all into the output.
// Differences from PyTorch, none of which changes a result: PKB reads the host values with one
// .item() / .tolist() per value or list (a synchronize each: more than a dozen); here every step's
// values come back in one copy and one stream synchronize (5 in all). The buckets are contiguous
// ascending pieces of the sorted shard in destination order, so they are sent from it directly
// (PKB's torch.cat of the chunks copies the same bytes), and the rebalanced pieces are received
// straight into the output (PKB's final torch.cat). The splitters only balance the work: whatever
// they are, the output is S's slice, which the oracle computes directly.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace {

__host__ __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__host__ __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__host__ __device__ __forceinline__ float to_float(float v) { return v; }
template <typename T> __device__ T from_float(float v);
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __half from_float<__half>(float v) { return __float2half(v); }
template <> __device__ float from_float<float>(float v) { return v; }

/// Purpose: this rank's `count` regular samples (PKB's _extract_samples). One thread per sample.
/// Inactive or empty ranks (sort_rank < 0 or n == 0) send (+inf, -1, -1) only.
template <typename T>
__global__ void extract_samples(const T* __restrict__ sorted, int64_t n, int64_t sort_rank, int64_t count,
                                T* __restrict__ values, int64_t* __restrict__ ranks, int64_t* __restrict__ positions) {
  const int64_t i = threadIdx.x;
  if (i >= count) return;
  const int64_t valid = count < n ? count : n;
  if (sort_rank < 0 || n == 0 || i >= valid) {
    values[i] = from_float<T>(INFINITY);
    ranks[i] = -1;
    positions[i] = -1;
    return;
  }
  const int64_t pos = count < n ? (i + 1) * n / count - 1 : i;
  values[i] = sorted[pos];
  ranks[i] = sort_rank;
  positions[i] = pos;
}

/// The number of elements of sorted[0, n) below v (inclusive: at most v): searchsorted left (right).
template <typename T>
__device__ int64_t search(const T* sorted, int64_t n, float v, bool inclusive) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const float x = to_float(sorted[mid]);
    if (inclusive ? x <= v : x < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/// Splitters as the host uploads them: [0, S) values, ranks, positions; then the active ranks.
struct Splitters {
  float value[8];
  int64_t rank[8];
  int64_t position[8];
  int64_t active[8];  // world rank of bucket b
  int count;          // S = A - 1
  int active_count;   // A
};

/// Purpose: the send count of every destination (PKB's _split_positions, then chunk sizes).
/// One thread: at most 7 binary searches. Inactive ranks send nothing.
template <typename T>
__global__ void bucket_counts(const T* __restrict__ sorted, int64_t n, int64_t sort_rank, Splitters sp, int world,
                              int64_t* __restrict__ send_counts) {
  for (int p = 0; p < world; ++p) send_counts[p] = 0;
  if (sort_rank < 0) return;
  int64_t prev = 0;
  for (int b = 0; b <= sp.count; ++b) {
    int64_t end = n;
    if (b < sp.count) {
      if (sort_rank > sp.rank[b]) end = search(sorted, n, sp.value[b], false);
      else if (sort_rank < sp.rank[b]) end = search(sorted, n, sp.value[b], true);
      else end = sp.position[b] + 1;
      end = end < n ? end : n;
      end = end > prev ? end : prev;
    }
    send_counts[sp.active[b]] = end - prev;
    prev = end;
  }
}

constexpr int kMaxWorld = 8;

/// Device scratch and pinned host mirrors of the small values, laid out in one block each.
struct Small {
  int64_t my_size;
  int64_t sizes[kMaxWorld];
  int64_t sample_ranks[kMaxWorld];
  int64_t sample_ranks_all[kMaxWorld * kMaxWorld];
  int64_t sample_pos[kMaxWorld];
  int64_t sample_pos_all[kMaxWorld * kMaxWorld];
  int64_t send_counts[kMaxWorld];
  int64_t recv_counts[kMaxWorld];
  float sample_vals_all[kMaxWorld * kMaxWorld];  // D values (at most 4 bytes each), as raw storage
  float sample_vals[kMaxWorld];
};

struct State {
  int64_t cap = 0;                 // T: no buffer ever holds more values
  void* sorted = nullptr;          // [T] D
  void* recv = nullptr;            // [T] D
  void* merged = nullptr;          // [T] D
  void* temp = nullptr;            // CUB radix-sort temporary storage
  size_t temp_bytes = 0;
  Small* dev = nullptr;
  Small* host = nullptr;           // pinned
};

template <typename T>
int radix_sort(pkb_context* ctx, State& st, const void* in, void* out, int64_t n) {
  if (n == 0) return 0;
  size_t bytes = st.temp_bytes;
  PKB_CUDA(ctx, cub::DeviceRadixSort::SortKeys(st.temp, bytes, static_cast<const T*>(in), static_cast<T*>(out),
                                               static_cast<int>(n), 0, static_cast<int>(sizeof(T) * 8), ctx->stream));
  return 0;
}

/// Copies `bytes` of st.dev at `offset` to the same place of the host mirror and waits for it.
int read_back(pkb_context* ctx, State& st, size_t offset, size_t bytes) {
  PKB_CUDA(ctx, cudaMemcpyAsync(reinterpret_cast<char*>(st.host) + offset, reinterpret_cast<char*>(st.dev) + offset,
                                bytes, cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  return 0;
}

/// PKB's _local_sizes: all-gather of one int64 per rank, read on the host (st.host->sizes).
int gather_sizes(pkb_context* ctx, State& st, int64_t mine) {
  st.host->my_size = mine;  // the last copy from it completed at the previous synchronize
  PKB_CUDA(ctx, cudaMemcpyAsync(&st.dev->my_size, &st.host->my_size, sizeof(int64_t), cudaMemcpyHostToDevice,
                                ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(&st.dev->my_size, st.dev->sizes, 1, ncclInt64, ctx->comm, ctx->stream));
  return read_back(ctx, st, offsetof(Small, sizes), sizeof(int64_t) * ctx->world);
}

/// PKB's _variable_all_to_all: the send counts (already in st.dev->send_counts) are exchanged and
/// read on the host with the receive counts, then the data: the send pieces are consecutive in
/// `send`, the received ones are placed consecutively (in source order) in `recv`. Returns the
/// number received through *received.
int variable_all_to_all(pkb_context* ctx, State& st, const void* send, void* recv, size_t e, ncclDataType_t type,
                        int64_t* received) {
  const int W = ctx->world;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int p = 0; p < W; ++p) {
    PKB_NCCL(ctx, ncclSend(&st.dev->send_counts[p], 1, ncclInt64, p, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(&st.dev->recv_counts[p], 1, ncclInt64, p, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  if (read_back(ctx, st, offsetof(Small, send_counts), 2 * sizeof(int64_t) * kMaxWorld)) return 1;
  int64_t total = 0;
  for (int p = 0; p < W; ++p) total += st.host->recv_counts[p];
  if (total > st.cap) PKB_FAIL_(ctx, "pkb_run", "more values received than the total T");
  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  int64_t soff = 0, roff = 0;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int p = 0; p < W; ++p) {
    const int64_t sc = st.host->send_counts[p], rc = st.host->recv_counts[p];
    if (sc > 0) PKB_NCCL(ctx, ncclSend(s + soff * e, (size_t)sc, type, p, ctx->comm, ctx->stream));
    if (rc > 0) PKB_NCCL(ctx, ncclRecv(r + roff * e, (size_t)rc, type, p, ctx->comm, ctx->stream));
    soff += sc;
    roff += rc;
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  *received = total;
  return 0;
}

/// Steps 3 and 4: the samples, gathered and sorted on the host, and the splitters.
template <typename T>
int choose_splitters(pkb_context* ctx, State& st, int64_t n, int64_t sort_rank, int A, Splitters& sp) {
  const int W = ctx->world;
  const ncclDataType_t type = pkb_nccl_dtype(ctx->dtype);
  T* vals = reinterpret_cast<T*>(st.dev->sample_vals);
  T* vals_all = reinterpret_cast<T*>(st.dev->sample_vals_all);
  extract_samples<T><<<1, 32, 0, ctx->stream>>>(static_cast<const T*>(st.sorted), n, sort_rank, A, vals,
                                                st.dev->sample_ranks, st.dev->sample_pos);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(vals, vals_all, (size_t)A, type, ctx->comm, ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(st.dev->sample_ranks, st.dev->sample_ranks_all, (size_t)A, ncclInt64, ctx->comm, ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(st.dev->sample_pos, st.dev->sample_pos_all, (size_t)A, ncclInt64, ctx->comm, ctx->stream));
  PKB_CUDA(ctx, cudaMemcpyAsync(st.host->sample_ranks_all, st.dev->sample_ranks_all, sizeof(int64_t) * W * A,
                                cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaMemcpyAsync(st.host->sample_pos_all, st.dev->sample_pos_all, sizeof(int64_t) * W * A,
                                cudaMemcpyDeviceToHost, ctx->stream));
  if (read_back(ctx, st, offsetof(Small, sample_vals_all), sizeof(T) * W * A)) return 1;
  const T* hv = reinterpret_cast<const T*>(st.host->sample_vals_all);
  std::vector<std::tuple<float, int64_t, int64_t>> samples;
  for (int i = 0; i < W * A; ++i)
    if (st.host->sample_ranks_all[i] >= 0)
      samples.emplace_back(to_float(hv[i]), st.host->sample_ranks_all[i], st.host->sample_pos_all[i]);
  std::sort(samples.begin(), samples.end());
  const int64_t usable = static_cast<int64_t>(samples.size());
  sp.count = A - 1;
  for (int s = 0; s < A - 1; ++s) {
    int64_t index = (s + 1) * usable / A - 1;
    index = std::max<int64_t>(0, std::min(index, usable - 1));
    std::tie(sp.value[s], sp.rank[s], sp.position[s]) = samples[index];
  }
  return 0;
}

template <typename T>
int run(pkb_context* ctx, State& st, const pkb_tensor& shard, pkb_tensor& out) {
  const int W = ctx->world, rank = ctx->rank;
  const size_t e = sizeof(T);
  const ncclDataType_t type = pkb_nccl_dtype(ctx->dtype);
  const int64_t n = shard.shape[0];
  if (n > st.cap) PKB_FAIL_(ctx, "pkb_run", "the shard is larger than the total T pkb_init sized for");
  // 1. Local sort.
  if (radix_sort<T>(ctx, st, shard.data, st.sorted, n)) return 1;
  // 2. Sizes, active ranks.
  if (gather_sizes(ctx, st, n)) return 1;
  Splitters sp{};
  int A = 0;
  int64_t sort_rank = -1;
  for (int p = 0; p < W; ++p)
    if (st.host->sizes[p] > 0) {
      if (p == rank) sort_rank = A;
      sp.active[A++] = p;
    }
  sp.active_count = A;
  if (A == 0) return 0;  // every shard empty: so is every output (T = 0)
  // 3, 4. Samples and splitters.
  if (choose_splitters<T>(ctx, st, n, sort_rank, A, sp)) return 1;
  // 5. Bucket sizes per destination, 6. the buckets exchanged.
  bucket_counts<T><<<1, 1, 0, ctx->stream>>>(static_cast<const T*>(st.sorted), n, sort_rank, sp, W, st.dev->send_counts);
  PKB_LAUNCH(ctx);
  int64_t m = 0;
  if (variable_all_to_all(ctx, st, st.sorted, st.recv, e, type, &m)) return 1;
  // 7. Sort what arrived.
  if (radix_sort<T>(ctx, st, st.recv, st.merged, m)) return 1;
  // 8. Exact rebalancing to the target ranges.
  if (gather_sizes(ctx, st, m)) return 1;
  int64_t total = 0, bucket_start = 0;
  for (int p = 0; p < W; ++p) {
    if (p < rank) bucket_start += st.host->sizes[p];
    total += st.host->sizes[p];
  }
  const int64_t base = total / W, extra = total % W;
  for (int p = 0; p < W; ++p) {
    const int64_t start = p * base + std::min<int64_t>(p, extra);
    const int64_t end = start + base + (p < extra ? 1 : 0);
    const int64_t lo = std::max(bucket_start, start), hi = std::min(bucket_start + m, end);
    st.host->send_counts[p] = lo < hi ? hi - lo : 0;
  }
  PKB_CUDA(ctx, cudaMemcpyAsync(st.dev->send_counts, st.host->send_counts, sizeof(int64_t) * W, cudaMemcpyHostToDevice,
                                ctx->stream));
  // The target ranges partition [0, total), so the pieces for ranks 0, 1, ... are consecutive in merged
  // from its start.
  int64_t got = 0;
  if (variable_all_to_all(ctx, st, st.merged, out.data, e, type, &got)) return 1;
  if (got != out.shape[0]) PKB_FAIL_(ctx, "pkb_run", "the rebalanced range does not match the output's length");
  return 0;
}

template <typename T>
int size_temp(pkb_context* ctx, State& st) {
  size_t bytes = 0;
  PKB_CUDA(ctx, cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const T*>(nullptr), static_cast<T*>(nullptr),
                                               static_cast<int>(st.cap), 0, static_cast<int>(sizeof(T) * 8)));
  st.temp_bytes = bytes;
  PKB_CUDA(ctx, cudaMalloc(&st.temp, bytes > 0 ? bytes : 1));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  st->cap = ctx->param(ctx, "T", 0);
  if (ctx->world > kMaxWorld) PKB_FAIL_(ctx, "pkb_init", "at most 8 ranks");
  if (st->cap <= 0 || st->cap >= (int64_t{1} << 30)) PKB_FAIL_(ctx, "pkb_init", "the total T must be in [1, 2^30)");
  const size_t bytes = (size_t)st->cap * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&st->sorted, bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->recv, bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->merged, bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->dev, sizeof(Small)));
  PKB_CUDA(ctx, cudaMallocHost(&st->host, sizeof(Small)));
  switch (ctx->dtype) {
    case PKB_BF16: return size_temp<__nv_bfloat16>(ctx, *st);
    case PKB_FP16: return size_temp<__half>(ctx, *st);
    case PKB_FP32: return size_temp<float>(ctx, *st);
    default: PKB_FAIL_(ctx, "pkb_init", "D must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in[0] = local_shard D [n_r]; out[0] = D [T // W + (rank < T % W)].
  State& st = *static_cast<State*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, st, in[0], out[0]);
    case PKB_FP16: return run<__half>(ctx, st, in[0], out[0]);
    case PKB_FP32: return run<float>(ctx, st, in[0], out[0]);
    default: PKB_FAIL_(ctx, "pkb_run", "D must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->sorted));
  PKB_CUDA(ctx, cudaFree(st->recv));
  PKB_CUDA(ctx, cudaFree(st->merged));
  PKB_CUDA(ctx, cudaFree(st->temp));
  PKB_CUDA(ctx, cudaFree(st->dev));
  PKB_CUDA(ctx, cudaFreeHost(st->host));
  delete st;
  ctx->user = nullptr;
  return 0;
}
