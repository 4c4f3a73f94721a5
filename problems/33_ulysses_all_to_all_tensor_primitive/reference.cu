// Baseline for problem 33 (Ulysses all-to-all of a 2-D tensor, scatter dim 0, gather dim 1), the
// steps PyTorch runs for PKB's solution():
//   1. torch.tensor_split over rows + .contiguous(): chunk j is rows j M/W .. (j+1) M/W - 1, already
//      contiguous in x, so nothing is copied (PyTorch's .contiguous() returns the same storage);
//   2. dist.all_to_all of the lists: grouped ncclSend / ncclRecv of chunk j with rank j, received
//      into W blocks of M/W x N in rank order;
//   3. torch.cat over columns (one kernel): block j becomes columns j N .. (j+1) N - 1 of every row,
//      i.e. a transpose of the W x (M/W) grid of N-element rows.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

struct State {
  void* received = nullptr;  // W blocks of M/W x N, block j from rank j
  size_t bytes = 0;
};

// dst[q][p] = src[p][q] for a P x Q grid of chunks of `chunk` elements of type V.
template <typename V>
__global__ void transpose_chunks(const V* __restrict__ src, V* __restrict__ dst, uint64_t P, uint64_t Q,
                                 uint64_t chunk) {
  uint64_t total = P * Q * chunk;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t c = i / chunk, k = i % chunk;
    uint64_t p = c / Q, q = c % Q;
    dst[(q * P + p) * chunk + k] = src[i];
  }
}

// Launches transpose_chunks with the widest vector that divides the chunk.
int launch_transpose(pkb_context* ctx, const void* src, void* dst, uint64_t P, uint64_t Q, uint64_t chunk_bytes) {
  uint64_t total = P * Q * chunk_bytes;
  if (total == 0) return 0;
  auto launch = [&](auto tag) {
    using V = decltype(tag);
    uint64_t n = total / sizeof(V);
    uint64_t want = (n + 255) / 256, cap = 65535ull * 8;
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    transpose_chunks<V><<<blocks, 256, 0, ctx->stream>>>(static_cast<const V*>(src), static_cast<V*>(dst), P, Q,
                                                         chunk_bytes / sizeof(V));
  };
  if (chunk_bytes % 16 == 0) launch(uint4{});
  else if (chunk_bytes % 8 == 0) launch(uint2{});
  else if (chunk_bytes % 4 == 0) launch(uint32_t{});
  else launch(uint16_t{});
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  int64_t numel = ctx->param(ctx, "M", 0) * ctx->param(ctx, "N", 0);
  s->bytes = (size_t)numel * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->received, s->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // [M, N]
  int W = ctx->world;
  uint64_t M = x.shape[0], N = x.shape[1];
  size_t e = pkb_dtype_size(x.dtype);
  size_t bytes = M * N * e;
  if (bytes > s->bytes) {
    ctx->set_error(ctx, "input larger than the receive buffer sized from the spec's M, N");
    return 1;
  }
  // 1-2. Row block j to rank j, straight from x; rank j's block into slot j.
  size_t block = bytes / W, count = block / e;
  ncclDataType_t t = pkb_nccl_dtype(x.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(x.data) + j * block, count, t, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(s->received) + j * block, count, t, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 3. received viewed as [W][M/W][N] -> out [M/W][W][N] = [M/W, W N].
  return launch_transpose(ctx, s->received, out[0].data, W, M / W, N * e);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->received));
  delete s;
  ctx->user = nullptr;
  return 0;
}
