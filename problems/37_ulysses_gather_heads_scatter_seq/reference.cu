// Baseline for problem 37 (Ulysses gather-heads / scatter-sequence), the steps PyTorch runs for
// PKB's solution() with seq_dim 1 (scattered) and head_dim 2 (gathered; > 1, so PKB takes its
// list-based _all_to_all):
//   1. pack: PKB's zero padding of the sequence to W Sl positions (torch.cat with torch.full(0),
//      only when W does not divide S) and torch.tensor_split over it + .contiguous() — block j =
//      positions j Sl .. (j+1) Sl - 1 of every sequence b, laid out as W contiguous B x Sl x H x Dh
//      blocks. One kernel does both here, where PyTorch launches a cat and W copies. When B = 1 and
//      no padding is needed every block is already contiguous in x and, as in PyTorch, nothing is
//      copied;
//   2. dist.all_to_all of the list: grouped ncclSend / ncclRecv of block j with rank j;
//   3. unpack: torch.cat over heads — block j (rank j's heads) lands at heads j H .. (j+1) H - 1 of
//      every (b, s): a transpose of the W x (B Sl) grid of H x Dh chunks.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

struct State {
  void* packed = nullptr;    // W blocks of B x Sl x H x Dh, in rank order, to send
  void* received = nullptr;  // W blocks, block j from rank j
  size_t bytes = 0;
};

// Pack with padding: dst[j][b][s][:] = src[b][j Sl + s][:] (rows of `row` elements of type V), or
// zeros where j Sl + s >= S.
template <typename V>
__global__ void pack_padded(const V* __restrict__ src, V* __restrict__ dst, uint64_t W, uint64_t B, uint64_t S,
                            uint64_t Sl, uint64_t row) {
  uint64_t total = W * B * Sl * row;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t r = i / row, k = i % row;
    uint64_t s = r % Sl, b = (r / Sl) % B, j = r / (Sl * B);
    uint64_t t = j * Sl + s;
    V v{};
    if (t < S) v = src[(b * S + t) * row + k];
    dst[i] = v;
  }
}

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

unsigned grid_for(uint64_t n) {
  uint64_t want = (n + 255) / 256, cap = 65535ull * 8;
  return (unsigned)(want < cap ? want : cap);
}

// Calls f(V{}) with the widest vector type whose size divides `bytes`.
template <typename F>
void with_vector(uint64_t bytes, F f) {
  if (bytes % 16 == 0) f(uint4{});
  else if (bytes % 8 == 0) f(uint2{});
  else if (bytes % 4 == 0) f(uint32_t{});
  else f(uint16_t{});
}

int launch_pack(pkb_context* ctx, const void* src, void* dst, uint64_t W, uint64_t B, uint64_t S, uint64_t Sl,
                uint64_t row_bytes) {
  uint64_t total = W * B * Sl * row_bytes;
  if (total == 0) return 0;
  with_vector(row_bytes, [&](auto tag) {
    using V = decltype(tag);
    pack_padded<V><<<grid_for(total / sizeof(V)), 256, 0, ctx->stream>>>(
        static_cast<const V*>(src), static_cast<V*>(dst), W, B, S, Sl, row_bytes / sizeof(V));
  });
  PKB_LAUNCH(ctx);
  return 0;
}

int launch_transpose(pkb_context* ctx, const void* src, void* dst, uint64_t P, uint64_t Q, uint64_t chunk_bytes) {
  uint64_t total = P * Q * chunk_bytes;
  if (total == 0) return 0;
  with_vector(chunk_bytes, [&](auto tag) {
    using V = decltype(tag);
    transpose_chunks<V><<<grid_for(total / sizeof(V)), 256, 0, ctx->stream>>>(
        static_cast<const V*>(src), static_cast<V*>(dst), P, Q, chunk_bytes / sizeof(V));
  });
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  int64_t numel = (int64_t)ctx->world * ctx->param(ctx, "B", 0) * ctx->param(ctx, "Sl", 0) * ctx->param(ctx, "H", 0) *
                  ctx->param(ctx, "Dh", 0);
  s->bytes = (size_t)numel * pkb_dtype_size(ctx->dtype);
  PKB_CUDA(ctx, cudaMalloc(&s->packed, s->bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->received, s->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // [B, S, H, Dh]
  uint64_t W = (uint64_t)ctx->world;
  uint64_t B = x.shape[0], S = x.shape[1], H = x.shape[2], Dh = x.shape[3];
  uint64_t Sl = (S + W - 1) / W;
  size_t e = pkb_dtype_size(x.dtype);
  uint64_t row_bytes = H * Dh * e;  // one position's heads
  size_t padded = W * B * Sl * row_bytes;
  if (padded > s->bytes) {
    ctx->set_error(ctx, "input larger than the buffers sized from the spec's B, Sl, H, Dh");
    return 1;
  }
  // 1. x (zero-padded to W Sl positions) viewed as [B][W][Sl H Dh] -> packed [W][B][Sl H Dh].
  const void* send = x.data;
  if (B != 1 || S % W != 0) {
    if (launch_pack(ctx, x.data, s->packed, W, B, S, Sl, row_bytes)) return 1;
    send = s->packed;
  }
  // 2. Block j to rank j, block from rank j into slot j.
  size_t block = padded / W, count = block / e;
  ncclDataType_t t = pkb_nccl_dtype(x.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < (int)W; ++j) {
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(send) + j * block, count, t, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(static_cast<char*>(s->received) + j * block, count, t, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 3. received viewed as [W][B Sl][H Dh] -> out [B Sl][W][H Dh] = [B, Sl, W H, Dh].
  return launch_transpose(ctx, s->received, out[0].data, W, B * Sl, row_bytes);
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
