// Baseline for problem 67 (sparse embedding exchange by owner), the steps PKB's solution() runs:
//   1. owner = idx % W, send_splits = bincount(owner): one histogram kernel;
//      perm = argsort(owner, stable): one counting-sort kernel (a single block walks the ids in
//      tiles of 1024, ranking equal owners with __match_any_sync), which also writes idx[perm];
//   2. all_to_all_single of the W counts (grouped ncclSend / ncclRecv of one int64 each), then the
//      host reads both count lists (PKB's .to("cpu") and synchronize);
//   3. value[perm]: one row-gather kernel into the send buffer;
//   4. all_to_all_single of the ids and of the rows with those splits (grouped ncclSend / ncclRecv),
//      received straight into the outputs.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

constexpr int kMaxWorld = 64;   // shared-memory counters and host split arrays
constexpr int kTile = 1024;     // threads of the sort kernel
constexpr int kWarps = kTile / 32;

struct State {
  int64_t* counts = nullptr;      // [W] send_splits
  int64_t* recv_counts = nullptr; // [W] recv_splits
  int64_t* perm = nullptr;        // [N] source index of every sorted position
  int64_t* send_idx = nullptr;    // [N] idx[perm]
  void* send_value = nullptr;     // [N, H] value[perm]
  int64_t* host = nullptr;        // pinned [2 W]: counts, recv_counts
  size_t value_bytes = 0;
};

// counts[o] = the number of ids with id % W == o (counts zeroed before).
__global__ void bincount_owners(const int64_t* __restrict__ idx, int64_t n, int W, int64_t* __restrict__ counts) {
  __shared__ unsigned long long local[kMaxWorld];
  for (int o = threadIdx.x; o < W; o += blockDim.x) local[o] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    atomicAdd(&local[idx[i] % W], 1ull);
  __syncthreads();
  for (int o = threadIdx.x; o < W; o += blockDim.x)
    if (local[o]) atomicAdd(reinterpret_cast<unsigned long long*>(counts) + o, local[o]);
}

// Stable counting sort by owner (one block of kTile threads): position of id i = the start of its
// owner's bucket + the ids of that owner before i. Writes perm and idx[perm].
__global__ void __launch_bounds__(kTile) sort_by_owner(const int64_t* __restrict__ idx, int64_t n, int W,
                                                       const int64_t* __restrict__ counts, int64_t* __restrict__ perm,
                                                       int64_t* __restrict__ send_idx) {
  __shared__ int64_t next[kMaxWorld];              // the next free position of every owner's bucket
  __shared__ int64_t at_warp[kWarps][kMaxWorld];   // per tile: each warp's ids of each owner, then their start
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    int64_t at = 0;
    for (int o = 0; o < W; ++o) {
      next[o] = at;
      at += counts[o];
    }
  }
  for (int64_t base = 0; base < n; base += kTile) {
    for (int o = lane; o < W; o += 32) at_warp[warp][o] = 0;
    __syncthreads();
    const int64_t i = base + threadIdx.x;
    const int owner = i < n ? (int)(idx[i] % W) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, owner);  // lanes of this warp with this owner
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
      perm[pos] = i;
      send_idx[pos] = idx[i];
    }
    __syncthreads();
  }
}

// dst[k][:] = src[perm[k]][:] for `rows` rows of `row` elements of type V.
template <typename V>
__global__ void gather_rows(const V* __restrict__ src, const int64_t* __restrict__ perm, V* __restrict__ dst,
                            uint64_t rows, uint64_t row) {
  uint64_t total = rows * row;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x)
    dst[i] = src[(uint64_t)perm[i / row] * row + i % row];
}

// Launches gather_rows with the widest vector that divides a row.
int launch_gather(pkb_context* ctx, const void* src, const int64_t* perm, void* dst, uint64_t rows, uint64_t row_bytes) {
  uint64_t total = rows * row_bytes;
  if (total == 0) return 0;
  auto launch = [&](auto tag) {
    using V = decltype(tag);
    uint64_t n = total / sizeof(V), want = (n + 255) / 256, cap = 65535ull * 8;
    gather_rows<V><<<(unsigned)(want < cap ? want : cap), 256, 0, ctx->stream>>>(
        static_cast<const V*>(src), perm, static_cast<V*>(dst), rows, row_bytes / sizeof(V));
  };
  if (row_bytes % 16 == 0) launch(uint4{});
  else if (row_bytes % 8 == 0) launch(uint2{});
  else if (row_bytes % 4 == 0) launch(uint32_t{});
  else launch(uint16_t{});
  PKB_LAUNCH(ctx);
  return 0;
}

// Grouped point-to-point exchange of rows of `row_bytes`: send[j] rows to rank j, recv[j] from it.
int exchange(pkb_context* ctx, const void* sendbuf, const int64_t* send, void* recvbuf, const int64_t* recv,
             size_t row_bytes) {
  size_t so = 0, ro = 0;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < ctx->world; ++j) {
    if (send[j] > 0)
      PKB_NCCL(ctx, ncclSend(static_cast<const char*>(sendbuf) + so, send[j] * row_bytes, ncclUint8, j, ctx->comm, ctx->stream));
    if (recv[j] > 0)
      PKB_NCCL(ctx, ncclRecv(static_cast<char*>(recvbuf) + ro, recv[j] * row_bytes, ncclUint8, j, ctx->comm, ctx->stream));
    so += send[j] * row_bytes;
    ro += recv[j] * row_bytes;
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  const int W = ctx->world;
  if (W > kMaxWorld) {
    ctx->set_error(ctx, "more ranks than this baseline's owner counters hold");
    return 1;
  }
  const int64_t N = ctx->param(ctx, "N", 0), H = ctx->param(ctx, "H", 0);
  s->value_bytes = (size_t)(N * H) * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->counts, W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->recv_counts, W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->perm, N * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->send_idx, N * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->send_value, s->value_bytes));
  PKB_CUDA(ctx, cudaMallocHost(&s->host, 2 * W * sizeof(int64_t)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const int W = ctx->world;
  const pkb_tensor& idx = in[0];    // [N] int64
  const pkb_tensor& value = in[1];  // [N, H]
  const int64_t N = idx.shape[0];
  const size_t row_bytes = (size_t)value.shape[1] * pkb_dtype_size(value.dtype);
  if ((size_t)N * row_bytes > s->value_bytes) {
    ctx->set_error(ctx, "value larger than the send buffer sized from the spec's N, H");
    return 1;
  }
  const int64_t* ids = static_cast<const int64_t*>(idx.data);
  // 1. Owner counts and the stable sort by owner.
  PKB_CUDA(ctx, cudaMemsetAsync(s->counts, 0, W * sizeof(int64_t), ctx->stream));
  int64_t want = (N + 255) / 256;
  bincount_owners<<<(unsigned)(want < 1024 ? (want > 0 ? want : 1) : 1024), 256, 0, ctx->stream>>>(ids, N, W, s->counts);
  sort_by_owner<<<1, kTile, 0, ctx->stream>>>(ids, N, W, s->counts, s->perm, s->send_idx);
  PKB_LAUNCH(ctx);
  // 2. Counts all-to-all; the host needs both lists.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(s->counts + j, 1, ncclInt64, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(s->recv_counts + j, 1, ncclInt64, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host, s->counts, W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host + W, s->recv_counts, W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  // 3. The sorted rows (enqueued before the host waits, as PyTorch's value[perm] is).
  if (launch_gather(ctx, value.data, s->perm, s->send_value, (uint64_t)N, row_bytes)) return 1;
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  int64_t received = 0;
  for (int j = 0; j < W; ++j) received += s->host[W + j];
  if (received != out[0].shape[0]) {
    ctx->set_error(ctx, "the received counts do not sum to the spec's output length");
    return 1;
  }
  // 4. Ids and rows to their owners.
  if (exchange(ctx, s->send_idx, s->host, out[0].data, s->host + W, sizeof(int64_t))) return 1;
  if (exchange(ctx, s->send_value, s->host, out[1].data, s->host + W, row_bytes)) return 1;
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->counts));
  PKB_CUDA(ctx, cudaFree(s->recv_counts));
  PKB_CUDA(ctx, cudaFree(s->perm));
  PKB_CUDA(ctx, cudaFree(s->send_idx));
  PKB_CUDA(ctx, cudaFree(s->send_value));
  PKB_CUDA(ctx, cudaFreeHost(s->host));
  delete s;
  ctx->user = nullptr;
  return 0;
}
