// Baseline for problem 68 (sparse feature fetch + projection), PKB's steps in PKB's order:
//   1. owner of every id, min(id // S, W - 1) (PKB's clamp; a no-op since num_total_nodes = W S),
//      and the count per owner (PKB: scatter_add_ of ones);
//   2. stable argsort of the owners (torch.argsort(stable=True)): a CUB radix sort of
//      (owner, position) pairs on the owner bits, which is stable; then the ids in that order;
//   3. all-to-all of the W counts (grouped ncclSend / ncclRecv, as PyTorch's all_to_all_single);
//   4. host sync: both count vectors to the host (PKB's .tolist() x 2; here one copy, one synchronize);
//   5. all-to-all of the sorted ids with those splits (zero-size splits skipped on both sides, as
//      PyTorch's all_to_all_single with split sizes does);
//   6. gather of the requested rows of the local shard, row id - rank S;
//   7. all-to-all of the rows back with the reversed splits;
//   8. the original order restored: PKB gathers with argsort(sort_idx), the inverse permutation; here
//      row j is written to row sort_idx[j] (the same rows, without a second sort);
//   9. out = emb @ proj_matrix: one cuBLAS GEMM in D with fp32 accumulation (no TF32 for fp32), as
//      torch.matmul.
// Scratch for the served ids and rows is sized for the worst case, every rank asking this rank for
// all of its Q ids (the skewed class does that to rank 0).
#include <pkb/solution.h>

#include <cub/cub.cuh>
#include <stdint.h>

#include <vector>

namespace {

struct State {
  int64_t Q = 0, E = 0, O = 0, S = 0;
  int W = 0;
  uint32_t* owner = nullptr;         // [Q] owner rank of each id
  uint32_t* owner_sorted = nullptr;  // [Q]
  int32_t* positions = nullptr;      // [Q] 0 .. Q-1 (written once)
  int32_t* sort_idx = nullptr;       // [Q] positions in stable owner order (PKB's sort_idx)
  int64_t* sorted_ids = nullptr;     // [Q]
  int64_t* counts = nullptr;         // [2W]: send counts per owner, then receive counts per peer
  int64_t* host_counts = nullptr;    // pinned [2W]
  int64_t* recv_ids = nullptr;       // [W Q] ids this rank serves
  void* fetched = nullptr;           // [W Q, E] rows this rank serves
  void* gathered = nullptr;          // [Q, E] rows back, in owner order
  void* emb = nullptr;               // [Q, E] rows in the ids' order
  void* cub_temp = nullptr;
  size_t cub_bytes = 0;
  int sort_bits = 1;
};

/// owner[i] = min(ids[i] / shard_rows, world - 1); counts[o] += 1 (per-block histogram first).
__global__ void owner_and_count(const int64_t* __restrict__ ids, int64_t n, int64_t shard_rows, int world,
                                uint32_t* __restrict__ owner, unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned int hist[];
  for (int o = threadIdx.x; o < world; o += blockDim.x) hist[o] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = ids[i] / shard_rows;
    o = o > world - 1 ? world - 1 : o;
    owner[i] = (uint32_t)o;
    if (o >= 0) atomicAdd(&hist[o], 1u);  // a negative id misses its count; the host rejects the splits
  }
  __syncthreads();
  for (int o = threadIdx.x; o < world; o += blockDim.x)
    if (hist[o]) atomicAdd(&counts[o], (unsigned long long)hist[o]);
}

__global__ void fill_positions(int32_t* __restrict__ positions, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    positions[i] = (int32_t)i;
}

/// sorted_ids[j] = ids[sort_idx[j]] (PKB: input_node_ids[sort_idx]).
__global__ void take_ids(const int64_t* __restrict__ ids, const int32_t* __restrict__ sort_idx, int64_t n,
                         int64_t* __restrict__ sorted_ids) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
    sorted_ids[j] = ids[sort_idx[j]];
}

/// rows[j] = shard[recv_ids[j] - base], rows of `vecs` elements of type V. The clamp into the shard
/// guards memory only: the spec's ids always land inside (PKB indexes without one).
template <typename V>
__global__ void gather_rows(const V* __restrict__ shard, const int64_t* __restrict__ recv_ids, int64_t base,
                            int64_t shard_rows, int64_t n_rows, int64_t vecs, V* __restrict__ rows) {
  const int64_t total = n_rows * vecs;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / vecs, k = i % vecs;
    int64_t local = recv_ids[r] - base;
    local = local < 0 ? 0 : (local >= shard_rows ? shard_rows - 1 : local);
    rows[i] = shard[local * vecs + k];
  }
}

/// emb[sort_idx[j]] = gathered[j]: the inverse of the owner sort (PKB: gathered[argsort(sort_idx)]).
template <typename V>
__global__ void restore_rows(const V* __restrict__ gathered, const int32_t* __restrict__ sort_idx, int64_t n_rows,
                             int64_t vecs, V* __restrict__ emb) {
  const int64_t total = n_rows * vecs;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = i / vecs, k = i % vecs;
    emb[(int64_t)sort_idx[j] * vecs + k] = gathered[i];
  }
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

/// Calls `launch(V{})` with the widest vector type that divides a row of `row_bytes`.
template <typename F>
void by_vector_width(size_t row_bytes, F launch) {
  if (row_bytes % 16 == 0) launch(uint4{});
  else if (row_bytes % 8 == 0) launch(uint2{});
  else if (row_bytes % 4 == 0) launch(uint32_t{});
  else launch(uint16_t{});
}

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Row-major C[M, N] = A[M, K] B[K, N] as the column-major product C^T = B^T A^T (fp32 accumulation,
// no TF32 for fp32, as torch.matmul's default).
int gemm(pkb_context* ctx, const void* A, const void* B, void* C, int64_t M, int64_t N, int64_t K) {
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_type(ctx->dtype);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, t, (int)N, A, t,
                               (int)K, &zero, C, t, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

/// One all-to-all with split sizes: `send_counts[r]` items of `item` elements from `src` (at
/// send_offs[r]) to rank r, `recv_counts[r]` from rank r into `dst` (at recv_offs[r]).
int all_to_all_v(pkb_context* ctx, const void* src, const std::vector<int64_t>& send_counts,
                 const std::vector<int64_t>& send_offs, void* dst, const std::vector<int64_t>& recv_counts,
                 const std::vector<int64_t>& recv_offs, int64_t item, size_t item_bytes, ncclDataType_t type) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    if (send_counts[r])
      PKB_NCCL(ctx, ncclSend(s + send_offs[r] * item_bytes, send_counts[r] * item, type, r, ctx->comm, ctx->stream));
    if (recv_counts[r])
      PKB_NCCL(ctx, ncclRecv(d + recv_offs[r] * item_bytes, recv_counts[r] * item, type, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  s->W = ctx->world;
  s->Q = ctx->param(ctx, "Q", 0);
  s->E = ctx->param(ctx, "E", 0);
  s->O = ctx->param(ctx, "O", 0);
  s->S = ctx->param(ctx, "S", 0);
  if (s->Q <= 0 || s->E <= 0 || s->O <= 0 || s->S <= 0 || (int64_t)s->W * s->Q >= (1LL << 31))
    PKB_FAIL_(ctx, "pkb_init", "need Q, E, O, S > 0 and W Q < 2^31");
  while ((1 << s->sort_bits) < s->W) ++s->sort_bits;
  const size_t row_bytes = (size_t)s->E * pkb_dtype_size(ctx->dtype);
  const size_t W = (size_t)s->W, Q = (size_t)s->Q;
  PKB_CUDA(ctx, cudaMalloc(&s->owner, Q * sizeof(uint32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->owner_sorted, Q * sizeof(uint32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->positions, Q * sizeof(int32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->sort_idx, Q * sizeof(int32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->sorted_ids, Q * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->counts, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host_counts, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->recv_ids, W * Q * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->fetched, W * Q * row_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->gathered, Q * row_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->emb, Q * row_bytes));
  PKB_CUDA(ctx, cub::DeviceRadixSort::SortPairs(nullptr, s->cub_bytes, s->owner, s->owner_sorted,
                                                (const int32_t*)nullptr, s->sort_idx, (int)s->Q, 0, s->sort_bits,
                                                ctx->stream));
  PKB_CUDA(ctx, cudaMalloc(&s->cub_temp, s->cub_bytes ? s->cub_bytes : 1));
  fill_positions<<<blocks_for(s->Q), 256, 0, ctx->stream>>>(s->positions, s->Q);
  PKB_LAUNCH(ctx);
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in: local_embedding_shard D [S, E], input_node_ids int64 [Q], proj_matrix D [E, O]; out: D [Q, O].
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& shard = in[0];
  const pkb_tensor& ids = in[1];
  const pkb_tensor& proj = in[2];
  const int W = ctx->world, rank = ctx->rank;
  const int64_t S = shard.shape[0], E = shard.shape[1], Q = ids.shape[0], O = proj.shape[1];
  if (S != s->S || E != s->E || Q != s->Q || proj.shape[0] != E || O != s->O || out[0].shape[0] != Q ||
      out[0].shape[1] != O)
    PKB_FAIL_(ctx, "pkb_run", "the tensors are not the shapes pkb_init sized for (S, E, Q, O)");
  const size_t row_bytes = (size_t)E * pkb_dtype_size(shard.dtype);
  const ncclDataType_t t = pkb_nccl_dtype(shard.dtype);
  int64_t* send_counts = s->counts;
  int64_t* recv_counts = s->counts + W;

  // 1. Owners and counts per owner.
  PKB_CUDA(ctx, cudaMemsetAsync(send_counts, 0, W * sizeof(int64_t), ctx->stream));
  owner_and_count<<<blocks_for(Q), 256, W * sizeof(unsigned int), ctx->stream>>>(
      static_cast<const int64_t*>(ids.data), Q, S, W, s->owner, reinterpret_cast<unsigned long long*>(send_counts));
  PKB_LAUNCH(ctx);

  // 2. Stable argsort by owner, and the ids in that order.
  size_t temp = s->cub_bytes;
  PKB_CUDA(ctx, cub::DeviceRadixSort::SortPairs(s->cub_temp, temp, s->owner, s->owner_sorted, s->positions, s->sort_idx,
                                                (int)Q, 0, s->sort_bits, ctx->stream));
  take_ids<<<blocks_for(Q), 256, 0, ctx->stream>>>(static_cast<const int64_t*>(ids.data), s->sort_idx, Q,
                                                   s->sorted_ids);
  PKB_LAUNCH(ctx);

  // 3. Counts all-to-all.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    PKB_NCCL(ctx, ncclSend(send_counts + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(recv_counts + r, 1, ncclInt64, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());

  // 4. Split sizes to the host.
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_counts, s->counts, 2 * W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  std::vector<int64_t> send(s->host_counts, s->host_counts + W), recv(s->host_counts + W, s->host_counts + 2 * W);
  std::vector<int64_t> send_off(W + 1, 0), recv_off(W + 1, 0);
  for (int r = 0; r < W; ++r) {
    send_off[r + 1] = send_off[r] + send[r];
    recv_off[r + 1] = recv_off[r] + recv[r];
  }
  if (send_off[W] != Q || recv_off[W] > (int64_t)W * Q)
    PKB_FAIL_(ctx, "pkb_run", "split sizes out of range (an id outside [0, num_total_nodes)?)");

  // 5. Ids to their owners.
  if (all_to_all_v(ctx, s->sorted_ids, send, send_off, s->recv_ids, recv, recv_off, 1, sizeof(int64_t), ncclInt64))
    return 1;

  // 6. Local row gather.
  const int64_t served = recv_off[W];
  if (served > 0) {
    by_vector_width(row_bytes, [&](auto tag) {
      using V = decltype(tag);
      const int64_t vecs = (int64_t)(row_bytes / sizeof(V));
      gather_rows<V><<<blocks_for(served * vecs), 256, 0, ctx->stream>>>(
          static_cast<const V*>(shard.data), s->recv_ids, (int64_t)rank * S, S, served, vecs, static_cast<V*>(s->fetched));
    });
    PKB_LAUNCH(ctx);
  }

  // 7. Rows back to the ranks that asked, in owner order.
  if (all_to_all_v(ctx, s->fetched, recv, recv_off, s->gathered, send, send_off, E, row_bytes, t)) return 1;

  // 8. The ids' original order.
  by_vector_width(row_bytes, [&](auto tag) {
    using V = decltype(tag);
    const int64_t vecs = (int64_t)(row_bytes / sizeof(V));
    restore_rows<V><<<blocks_for(Q * vecs), 256, 0, ctx->stream>>>(static_cast<const V*>(s->gathered), s->sort_idx, Q,
                                                                   vecs, static_cast<V*>(s->emb));
  });
  PKB_LAUNCH(ctx);

  // 9. Projection.
  return gemm(ctx, s->emb, proj.data, out[0].data, Q, O, E);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->owner));
  PKB_CUDA(ctx, cudaFree(s->owner_sorted));
  PKB_CUDA(ctx, cudaFree(s->positions));
  PKB_CUDA(ctx, cudaFree(s->sort_idx));
  PKB_CUDA(ctx, cudaFree(s->sorted_ids));
  PKB_CUDA(ctx, cudaFree(s->counts));
  PKB_CUDA(ctx, cudaFreeHost(s->host_counts));
  PKB_CUDA(ctx, cudaFree(s->recv_ids));
  PKB_CUDA(ctx, cudaFree(s->fetched));
  PKB_CUDA(ctx, cudaFree(s->gathered));
  PKB_CUDA(ctx, cudaFree(s->emb));
  PKB_CUDA(ctx, cudaFree(s->cub_temp));
  delete s;
  ctx->user = nullptr;
  return 0;
}
