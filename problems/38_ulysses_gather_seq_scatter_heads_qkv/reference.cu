// Baseline for problem 38 (Ulysses gather-seq / scatter-heads of a fused QKV tensor), the steps
// PyTorch runs for PKB's solution(): qkv is viewed as [B, S, 3, HD] and PKB's scatter dim is the
// original rank (3), i.e. the last dim of that view — > 1, so PKB takes its list-based _all_to_all:
//   1. pack: torch.tensor_split of the last dim + .contiguous() — chunk j = columns j HD/W ..
//      (j+1) HD/W - 1 of each of q, k, v for every token, laid out as W contiguous B x S x 3 x HD/W
//      blocks (one kernel here, where PyTorch launches W copies);
//   2. dist.all_to_all of the list: grouped ncclSend / ncclRecv of block j with rank j;
//   3. unpack: torch.cat over the sequence — block j (rank j's positions) lands at rows j S ..
//      (j+1) S - 1 of every sequence b; the final view to [B, W S, 3 HD / W] (restore_shape) is free.
// Both copies are the same operation: a transpose of a P x Q grid of equal chunks.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

struct State {
  void* packed = nullptr;    // W blocks of B x S x 3 x HD/W, in rank order, to send
  void* received = nullptr;  // W blocks, block j from rank j
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
  int64_t numel = ctx->param(ctx, "B", 0) * ctx->param(ctx, "S", 0) * 3 * ctx->param(ctx, "H", 0) * ctx->param(ctx, "Dh", 0);
  s->bytes = (size_t)numel * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->packed, s->bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->received, s->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // [B, S, 3 HD]
  int W = ctx->world;
  uint64_t B = x.shape[0], S = x.shape[1], HD = x.shape[2] / 3;
  size_t e = pkb_dtype_size(x.dtype);
  size_t bytes = B * S * 3 * HD * e;
  if (bytes > s->bytes) {
    ctx->set_error(ctx, "input larger than the buffers sized from the spec's B, S, H, Dh");
    return 1;
  }
  uint64_t part = (HD / W) * e;  // one rank's share of q, k or v of one token
  // 1. qkv viewed as [B S 3][W][HD/W] -> packed [W][B S 3][HD/W].
  if (launch_transpose(ctx, x.data, s->packed, B * S * 3, W, part)) return 1;
  // 2. Block j to rank j, block from rank j into slot j.
  size_t block = bytes / W, count = block / e;
  ncclDataType_t t = pkb_nccl_dtype(x.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(static_cast<char*>(s->packed) + j * block, count, t, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(s->received) + j * block, count, t, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 3. received viewed as [W][B][S 3 HD/W] -> out [B][W][S 3 HD/W] = [B, W S, 3 HD/W].
  return launch_transpose(ctx, s->received, out[0].data, W, B, S * 3 * part);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->packed));
  PKB_CUDA(ctx, cudaFree(s->received));
  delete s;
  ctx->user = nullptr;
  return 0;
}
