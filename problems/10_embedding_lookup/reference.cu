// Baseline for problem 10 (row-sharded embedding lookup), PKB's steps in PKB's order:
//   1. owner of every index (index // M) and the count per owner (PKB: one boolean mask per owner);
//   2. exchange the counts: all-to-all of W int64 (grouped ncclSend / ncclRecv, as PyTorch's
//      all_to_all_single with equal splits);
//   3. host sync: both count vectors to the host (PKB's .item() / .tolist(); one copy and one stream
//      synchronize here instead of several);
//   4. stable bucketing of the indices by owner (PKB: torch.cat of the per-owner masked selections),
//      here a CUB radix sort of (owner, index) pairs on the owner bits, which is stable;
//   5. all-to-all of the indices with those splits (grouped ncclSend / ncclRecv, zero-size splits
//      skipped on both sides, as PyTorch's all_to_all_single with split sizes does);
//   6. gather the requested rows of the local shard (clamped local row, as PKB);
//   7. all-to-all of the rows back with the reversed splits, straight into the output.
// The output keeps PKB's order: rows grouped by owner rank, stable within an owner; nothing is
// un-permuted. Scratch is sized for the worst case (every rank asks this rank for all M rows).
#include <pkb/solution.h>

#include <cub/cub.cuh>
#include <stdint.h>

#include <vector>

namespace {

struct State {
  int64_t M = 0, N = 0;
  uint32_t* owner = nullptr;        // [M] owner rank of each index
  uint32_t* owner_sorted = nullptr; // [M]
  int64_t* idx_sorted = nullptr;    // [M] indices bucketed by owner
  int64_t* counts = nullptr;        // [2W]: send counts per owner, then receive counts per peer
  int64_t* host_counts = nullptr;   // pinned [2W]
  int64_t* recv_idx = nullptr;      // [W M] indices this rank must serve
  void* rows = nullptr;             // [W M, N] rows this rank serves
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
  int sort_bits = 1;
};

// owner[i] = indices[i] / M; counts[o] += 1 (a per-block histogram in shared memory first).
__global__ void owner_and_count(const int64_t* __restrict__ indices, int64_t n, int64_t shard_rows, int world,
                                uint32_t* __restrict__ owner, unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned int hist[];
  for (int o = threadIdx.x; o < world; o += blockDim.x) hist[o] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t o = (uint32_t)(indices[i] / shard_rows);
    owner[i] = o;
    if (o < (uint32_t)world) atomicAdd(&hist[o], 1u);  // the host rejects counts that miss an index
  }
  __syncthreads();
  for (int o = threadIdx.x; o < world; o += blockDim.x)
    if (hist[o]) atomicAdd(&counts[o], (unsigned long long)hist[o]);
}

// rows[i] = shard[clamp(recv_idx[i] - base, 0, M - 1)], rows of `vecs` elements of type V.
template <typename V>
__global__ void gather_rows(const V* __restrict__ shard, const int64_t* __restrict__ recv_idx, int64_t base,
                            int64_t shard_rows, int64_t n_rows, int64_t vecs, V* __restrict__ rows) {
  int64_t total = n_rows * vecs;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / vecs, k = i % vecs;
    int64_t local = recv_idx[r] - base;
    local = local < 0 ? 0 : (local >= shard_rows ? shard_rows - 1 : local);
    rows[i] = shard[local * vecs + k];
  }
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

int launch_gather(pkb_context* ctx, const void* shard, const int64_t* recv_idx, int64_t base, int64_t shard_rows,
                  int64_t n_rows, size_t row_bytes, void* rows) {
  auto launch = [&](auto tag) {
    using V = decltype(tag);
    int64_t vecs = (int64_t)(row_bytes / sizeof(V));
    gather_rows<V><<<blocks_for(n_rows * vecs), 256, 0, ctx->stream>>>(static_cast<const V*>(shard), recv_idx, base,
                                                                        shard_rows, n_rows, vecs, static_cast<V*>(rows));
  };
  if (row_bytes % 16 == 0) launch(uint4{});
  else if (row_bytes % 8 == 0) launch(uint2{});
  else if (row_bytes % 4 == 0) launch(uint32_t{});
  else launch(uint16_t{});
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  int W = ctx->world;
  s->M = ctx->param(ctx, "M", 0);
  s->N = ctx->param(ctx, "N", 0);
  while ((1 << s->sort_bits) < W) ++s->sort_bits;
  size_t row_bytes = (size_t)s->N * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->owner, s->M * sizeof(uint32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->owner_sorted, s->M * sizeof(uint32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->idx_sorted, s->M * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->counts, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host_counts, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->recv_idx, (size_t)W * s->M * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->rows, (size_t)W * s->M * row_bytes));
  PKB_CUDA(ctx, cub::DeviceRadixSort::SortPairs(nullptr, s->cub_bytes, s->owner, s->owner_sorted, (const int64_t*)nullptr,
                                                s->idx_sorted, (int)s->M, 0, s->sort_bits, ctx->stream));
  PKB_CUDA(ctx, cudaMalloc(&s->cub_temp, s->cub_bytes ? s->cub_bytes : 1));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& indices = in[0];  // int64 [M]
  const pkb_tensor& shard = in[1];    // D [M, N]
  int W = ctx->world, rank = ctx->rank;
  int64_t n = indices.shape[0], M = shard.shape[0], N = shard.shape[1];
  if (n > s->M || M > s->M || N > s->N) {
    ctx->set_error(ctx, "inputs larger than the buffers sized from the spec's M and N");
    return 1;
  }
  size_t row_bytes = (size_t)N * pkb_dtype_size(shard.dtype);
  ncclDataType_t t = pkb_nccl_dtype(shard.dtype);
  int64_t* send_counts = s->counts;
  int64_t* recv_counts = s->counts + W;

  // 1. Owners and counts per owner.
  PKB_CUDA(ctx, cudaMemsetAsync(send_counts, 0, W * sizeof(int64_t), ctx->stream));
  if (n > 0) {
    owner_and_count<<<blocks_for(n), 256, W * sizeof(unsigned int), ctx->stream>>>(
        static_cast<const int64_t*>(indices.data), n, M, W, s->owner, reinterpret_cast<unsigned long long*>(send_counts));
    PKB_LAUNCH(ctx);
  }

  // 2. Counts all-to-all.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    PKB_NCCL(ctx, ncclSend(send_counts + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(recv_counts + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 3. Split sizes to the host.
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_counts, s->counts, 2 * W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  std::vector<int64_t> send(s->host_counts, s->host_counts + W), recv(s->host_counts + W, s->host_counts + 2 * W);
  std::vector<int64_t> send_off(W + 1, 0), recv_off(W + 1, 0);
  for (int r = 0; r < W; ++r) {
    send_off[r + 1] = send_off[r] + send[r];
    recv_off[r + 1] = recv_off[r] + recv[r];
  }
  if (send_off[W] != n || recv_off[W] > (int64_t)W * s->M) {
    ctx->set_error(ctx, "split sizes out of range (an index outside [0, W M)?)");
    return 1;
  }

  // 4. Stable bucketing by owner.
  if (n > 0) {
    size_t temp = s->cub_bytes;
    PKB_CUDA(ctx, cub::DeviceRadixSort::SortPairs(s->cub_temp, temp, s->owner, s->owner_sorted,
                                                  static_cast<const int64_t*>(indices.data), s->idx_sorted, (int)n, 0,
                                                  s->sort_bits, ctx->stream));
  }

  // 5. Indices to their owners.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    if (send[r]) PKB_NCCL(ctx, ncclSend(s->idx_sorted + send_off[r], send[r], ncclInt64, r, ctx->comm, ctx->stream));
    if (recv[r]) PKB_NCCL(ctx, ncclRecv(s->recv_idx + recv_off[r], recv[r], ncclInt64, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 6. Local row gather.
  int64_t total_recv = recv_off[W];
  if (total_recv > 0 && launch_gather(ctx, shard.data, s->recv_idx, (int64_t)rank * M, M, total_recv, row_bytes, s->rows))
    return 1;

  // 7. Rows back to the ranks that asked, into the output in owner order.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    if (recv[r])
      PKB_NCCL(ctx, ncclSend(static_cast<char*>(s->rows) + recv_off[r] * row_bytes, recv[r] * N, t, r, ctx->comm, ctx->stream));
    if (send[r])
      PKB_NCCL(ctx, ncclRecv(static_cast<char*>(out[0].data) + send_off[r] * row_bytes, send[r] * N, t, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->owner));
  PKB_CUDA(ctx, cudaFree(s->owner_sorted));
  PKB_CUDA(ctx, cudaFree(s->idx_sorted));
  PKB_CUDA(ctx, cudaFree(s->counts));
  PKB_CUDA(ctx, cudaFreeHost(s->host_counts));
  PKB_CUDA(ctx, cudaFree(s->recv_idx));
  PKB_CUDA(ctx, cudaFree(s->rows));
  PKB_CUDA(ctx, cudaFree(s->cub_temp));
  delete s;
  ctx->user = nullptr;
  return 0;
}
