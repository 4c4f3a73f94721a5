// Baseline for problem 65 (GraphBolt feature exchange), the steps PyTorch runs for PKB's solution():
//   1. gathered = local_features[seed_inverse_ids]: one row-gather kernel into a send buffer (PyTorch's
//      advanced indexing, also one kernel);
//   2. PKB's _all_to_all on the split lists, both rotated by rank (_shift: entry j of the rotated
//      list is chunk (j - rank) mod W), through dist.all_to_all: grouped ncclSend / ncclRecv with rank
//      j of gathered chunk (j - rank) mod W, received straight into output chunk (j - rank) mod W
//      (PyTorch's output list is views of `out`, so it receives in place too).
// Every chunk is P rows (PKB's counts are [rows_per_peer] * W).
#include <pkb/solution.h>

#include <stdint.h>

namespace {

struct State {
  void* gathered = nullptr;  // R x F rows of D: local_features[seed_inverse_ids]
  size_t bytes = 0;
};

// dst[i][:] = src[ids[i]][:] for `rows` rows of `row` elements of type V.
template <typename V>
__global__ void gather_rows(const V* __restrict__ src, const int64_t* __restrict__ ids, V* __restrict__ dst,
                            uint64_t rows, uint64_t row) {
  uint64_t total = rows * row;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t r = i / row, k = i % row;
    dst[i] = src[(uint64_t)ids[r] * row + k];
  }
}

// Launches gather_rows with the widest vector that divides a row.
int launch_gather(pkb_context* ctx, const void* src, const int64_t* ids, void* dst, uint64_t rows,
                  uint64_t row_bytes) {
  uint64_t total = rows * row_bytes;
  if (total == 0) return 0;
  auto launch = [&](auto tag) {
    using V = decltype(tag);
    uint64_t n = total / sizeof(V);
    uint64_t want = (n + 255) / 256, cap = 65535ull * 8;
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    gather_rows<V><<<blocks, 256, 0, ctx->stream>>>(static_cast<const V*>(src), ids, static_cast<V*>(dst), rows,
                                                    row_bytes / sizeof(V));
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
  int64_t numel = ctx->param(ctx, "R", 0) * ctx->param(ctx, "F", 0);
  s->bytes = (size_t)numel * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->gathered, s->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& feat = in[0];  // [Ns, F]
  const pkb_tensor& ids = in[1];   // [R] int64
  int W = ctx->world, rank = ctx->rank;
  uint64_t R = ids.shape[0], F = feat.shape[1];
  size_t e = pkb_dtype_size(feat.dtype);
  size_t bytes = R * F * e;
  if (bytes > s->bytes) {
    ctx->set_error(ctx, "seed_inverse_ids longer than the send buffer sized from the spec's R, F");
    return 1;
  }
  // 1. Gather the requested rows.
  if (launch_gather(ctx, feat.data, static_cast<const int64_t*>(ids.data), s->gathered, R, F * e)) return 1;
  // 2. Rotated exchange: chunk (j - rank) mod W both ways with rank j.
  size_t chunk = bytes / W, count = chunk / e;
  ncclDataType_t t = pkb_nccl_dtype(feat.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    size_t at = (size_t)((j - rank + W) % W) * chunk;
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(s->gathered) + at, count, t, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(out[0].data) + at, count, t, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->gathered));
  delete s;
  ctx->user = nullptr;
  return 0;
}
