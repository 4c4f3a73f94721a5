// Baseline for problem 69 (ranking of positive edges among their negatives), PKB's steps in PKB's order:
//   1. sizes: an int64 W-vector that is zero but for this rank's row count, all-reduced (sum), once for
//      the positives and once for the negatives (ncclAllReduce x 2, as PKB's two broadcast_data calls);
//   2. both size vectors to the host (PKB's .tolist(); here one copy and one synchronize for both);
//   3. all-gather-v of the positives, then of the negatives. PKB calls all_to_all_single with the
//      local tensor repeated W times as the send buffer; here the one local buffer is sent to every
//      rank (the same bytes, without the W-fold repeat copy) in an NCCL group of ncclSend / ncclRecv,
//      which is how PyTorch runs all_to_all_single with split sizes. Rows land in rank order;
//   4. scores [T, K+1] = sigmoid(cat([P, N], dim 1)) in D: fp32 math 1 / (1 + exp(-x)), rounded to D,
//      as torch.sigmoid (cat and sigmoid are one elementwise kernel here);
//   5. per row, a stable sort of (score, column) by decreasing score and the 1-based position of
//      column 0 (torch.sort(descending) + nonzero(indices == 0) + 1) in one kernel, one block per row.
//      PyTorch sorts rows of 129 .. 4096 elements with a stable block radix sort (CUB), so a negative
//      that ties the positive stays after it: the spec's tie rule, which this sort keeps too.
#include <pkb/solution.h>

#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <vector>

namespace {

constexpr int kSortThreads = 256;
constexpr int kSortItems = 4;
constexpr int kMaxRow = kSortThreads * kSortItems;  // K + 1 <= 1024 (PKB caps K at 1000)

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }

/// The sort key of a score: its bits. Sigmoids are positive, and positive floats order as their
/// bit patterns do (unsigned), so a radix sort of the bits orders the values.
template <typename T> struct SortKey;
template <> struct SortKey<__nv_bfloat16> {
  using type = uint16_t;
  static __device__ __forceinline__ type of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
};
template <> struct SortKey<__half> {
  using type = uint16_t;
  static __device__ __forceinline__ type of(__half v) { return __half_as_ushort(v); }
};
template <> struct SortKey<float> {
  using type = uint32_t;
  static __device__ __forceinline__ type of(float v) { return __float_as_uint(v); }
};

/// sizes[i] = (i % W == rank) ? n : 0 for i < 2 W: the positives' and the negatives' size vectors
/// before their all-reduces (PKB: torch.zeros(W), sizes[rank] = rows).
__global__ void fill_sizes(int64_t* __restrict__ sizes, int world, int rank, int64_t n) {
  for (int i = threadIdx.x; i < 2 * world; i += blockDim.x) sizes[i] = (i % world == rank) ? n : 0;
}

/// scores[r][0] = sigmoid(pos[r]), scores[r][1 + j] = sigmoid(neg[r][j]), each rounded to T.
template <typename T>
__global__ void sigmoid_scores(const T* __restrict__ pos, const T* __restrict__ neg, int64_t rows, int64_t k,
                               T* __restrict__ scores) {
  const int64_t len = k + 1, total = rows * len;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / len, c = i % len;
    const float x = to_float(c == 0 ? pos[r] : neg[r * k + c - 1]);
    scores[i] = from_float<T>(1.0f / (1.0f + expf(-x)));
  }
}

/// Purpose: ranks[r] = 1 + the position of column 0 in row r of `scores` sorted by decreasing value,
/// ties in column order (torch.sort(descending) on one row, then nonzero(indices == 0) + 1).
/// Approach: one block per row; CUB's block radix sort of (key bits, column) pairs, which is stable;
/// the row is padded to kMaxRow with key 0 (below every positive score; the padding's columns come
/// after the row's, so a stable sort keeps it behind any real zero); the thread holding column 0
/// after the sort writes its position.
/// Requires: len <= kMaxRow, blockDim.x == kSortThreads, every score >= +0.
template <typename T>
__global__ void __launch_bounds__(kSortThreads) positive_rank(const T* __restrict__ scores, int len,
                                                              int64_t* __restrict__ ranks) {
  using Key = typename SortKey<T>::type;
  using Sort = cub::BlockRadixSort<Key, kSortThreads, kSortItems, int>;
  __shared__ typename Sort::TempStorage temp;
  const T* row = scores + (int64_t)blockIdx.x * len;
  Key keys[kSortItems];
  int cols[kSortItems];
  for (int j = 0; j < kSortItems; ++j) {
    const int c = threadIdx.x * kSortItems + j;  // blocked arrangement: thread t holds t*items ..
    keys[j] = c < len ? SortKey<T>::of(row[c]) : Key(0);
    cols[j] = c;
  }
  Sort(temp).SortDescending(keys, cols);
  for (int j = 0; j < kSortItems; ++j)
    if (cols[j] == 0) ranks[blockIdx.x] = threadIdx.x * kSortItems + j + 1;
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

struct State {
  int64_t T = 0, K = 0;           // rows gathered and negatives per row (spec params)
  int64_t* sizes = nullptr;       // [2W]: the positives' size vector, then the negatives'
  int64_t* host_sizes = nullptr;  // pinned [2W]
  void* pos = nullptr;            // [T] D: every rank's positives, rank order
  void* neg = nullptr;            // [T, K] D: every rank's negatives
  void* scores = nullptr;         // [T, K + 1] D: the sigmoids of cat([pos, neg], 1)
};

/// All-gather-v of `count` elements per row: this rank's `rows` rows to every rank, rank r's rows
/// (counts[r]) into `dst` at offset offs[r] (PKB's all_to_all_single of the repeated shard).
int gather_rows(pkb_context* ctx, const void* src, int64_t rows, void* dst, const std::vector<int64_t>& counts,
                const std::vector<int64_t>& offs, int64_t count, ncclDataType_t type, size_t elem_bytes) {
  char* out = static_cast<char*>(dst);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    if (rows) PKB_NCCL(ctx, ncclSend(src, rows * count, type, r, ctx->comm, ctx->stream));
    if (counts[r])
      PKB_NCCL(ctx, ncclRecv(out + offs[r] * count * elem_bytes, counts[r] * count, type, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

template <typename T>
int run(pkb_context* ctx, State& st, const pkb_tensor* in, pkb_tensor* out) {
  const int W = ctx->world, rank = ctx->rank;
  const int64_t n = in[0].shape[0], K = st.K;
  if (in[1].shape[0] != n || in[1].shape[1] != K || out[0].shape[0] != st.T)
    PKB_FAIL_(ctx, "pkb_run", "the tensors are not the shapes pkb_init sized for (n_r, K, T)");

  // 1. Size vectors, all-reduced.
  fill_sizes<<<1, 32, 0, ctx->stream>>>(st.sizes, W, rank, n);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(st.sizes, st.sizes, W, ncclInt64, ncclSum, ctx->comm, ctx->stream));
  PKB_NCCL(ctx, ncclAllReduce(st.sizes + W, st.sizes + W, W, ncclInt64, ncclSum, ctx->comm, ctx->stream));

  // 2. To the host.
  PKB_CUDA(ctx, cudaMemcpyAsync(st.host_sizes, st.sizes, 2 * W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  std::vector<int64_t> pos_rows(st.host_sizes, st.host_sizes + W), neg_rows(st.host_sizes + W, st.host_sizes + 2 * W);
  std::vector<int64_t> offs(W + 1, 0);
  for (int r = 0; r < W; ++r) {
    if (pos_rows[r] != neg_rows[r] || pos_rows[r] < 0)
      PKB_FAIL_(ctx, "pkb_run", "a rank's positive and negative row counts differ");
    offs[r + 1] = offs[r] + pos_rows[r];
  }
  if (offs[W] != st.T) PKB_FAIL_(ctx, "pkb_run", "the gathered row count is not the spec's T");

  // 3. All-gather-v of the positives, then of the negatives.
  const ncclDataType_t nt = pkb_nccl_dtype(ctx->dtype);
  if (gather_rows(ctx, in[0].data, n, st.pos, pos_rows, offs, 1, nt, sizeof(T))) return 1;
  if (gather_rows(ctx, in[1].data, n, st.neg, neg_rows, offs, K, nt, sizeof(T))) return 1;

  // 4. Sigmoid of the concatenated scores.
  const int64_t rows = st.T;
  sigmoid_scores<T><<<blocks_for(rows * (K + 1)), 256, 0, ctx->stream>>>(
      static_cast<const T*>(st.pos), static_cast<const T*>(st.neg), rows, K, static_cast<T*>(st.scores));
  PKB_LAUNCH(ctx);

  // 5. Per-row stable descending sort and the positive's position.
  positive_rank<T><<<(unsigned)rows, kSortThreads, 0, ctx->stream>>>(static_cast<const T*>(st.scores), (int)(K + 1),
                                                                     static_cast<int64_t*>(out[0].data));
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  st->T = ctx->param(ctx, "T", 0);
  st->K = ctx->param(ctx, "K", 0);
  if (st->T <= 0 || st->T > 2147483647LL || st->K <= 0 || st->K + 1 > kMaxRow)
    PKB_FAIL_(ctx, "pkb_init", "need 0 < T < 2^31 rows and 0 < K < 1024 negatives per row");
  const size_t e = pkb_dtype_size(ctx->dtype);
  const int W = ctx->world;
  PKB_CUDA(ctx, cudaMalloc(&st->sizes, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMallocHost(&st->host_sizes, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&st->pos, (size_t)st->T * e));
  PKB_CUDA(ctx, cudaMalloc(&st->neg, (size_t)(st->T * st->K) * e));
  PKB_CUDA(ctx, cudaMalloc(&st->scores, (size_t)(st->T * (st->K + 1)) * e));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in: local_pos_scores D [n_r], local_neg_scores D [n_r, K]; out: ranks int64 [T].
  State& st = *static_cast<State*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, st, in, out);
    case PKB_FP16: return run<__half>(ctx, st, in, out);
    case PKB_FP32: return run<float>(ctx, st, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "D must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->sizes));
  PKB_CUDA(ctx, cudaFreeHost(st->host_sizes));
  PKB_CUDA(ctx, cudaFree(st->pos));
  PKB_CUDA(ctx, cudaFree(st->neg));
  PKB_CUDA(ctx, cudaFree(st->scores));
  delete st;
  ctx->user = nullptr;
  return 0;
}
