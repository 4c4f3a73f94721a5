// Baseline for problem 66 (GraphBolt feature exchange backward), PKB's two steps:
//   1. PKB's _all_to_all on the split lists, both rotated by rank (_shift: entry j of the rotated
//      list is chunk (j - rank) mod W), through dist.all_to_all: grouped ncclSend / ncclRecv with rank
//      j of grad_output chunk (j - rank) mod W, received into chunk (j - rank) mod W of a buffer;
//   2. torch.sparse.mm(coo, received) with coo[seed_inverse_ids[k], k] = 1, i.e. row k of the
//      received tensor added into row seed_inverse_ids[k]. PyTorch coalesces the COO matrix and calls
//      cuSPARSE's SpMM; here it is a memset and one fp32 atomic scatter-add kernel (cheaper than a sort
//      and a sparse GEMM). The spec's inputs make every order of those additions exact.
// Every chunk is P rows (PKB's counts are [rows_per_peer] * W); all tensors are fp32.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

struct State {
  float* received = nullptr;  // R x F: the rows of grad_output this rank gets back
  size_t bytes = 0;
};

// out[ids[k]][f] += src[k][f] for `rows` rows of `row` floats.
__global__ void scatter_add_rows(const float* __restrict__ src, const int64_t* __restrict__ ids,
                                 float* __restrict__ out, uint64_t rows, uint64_t row) {
  uint64_t total = rows * row;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t k = i / row, f = i % row;
    atomicAdd(out + (uint64_t)ids[k] * row + f, src[i]);
  }
}

int launch_scatter_add(pkb_context* ctx, const float* src, const int64_t* ids, float* out, uint64_t rows,
                       uint64_t row) {
  uint64_t total = rows * row;
  if (total == 0) return 0;
  uint64_t want = (total + 255) / 256, cap = 65535ull * 8;
  unsigned blocks = (unsigned)(want < cap ? want : cap);
  scatter_add_rows<<<blocks, 256, 0, ctx->stream>>>(src, ids, out, rows, row);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  s->bytes = (size_t)(ctx->param(ctx, "R", 0) * ctx->param(ctx, "F", 0)) * sizeof(float);
  PKB_CUDA(ctx, cudaMalloc(&s->received, s->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& grad = in[0];  // [R, F] fp32
  const pkb_tensor& ids = in[1];   // [R] int64
  pkb_tensor& result = out[0];     // [Ns, F] fp32
  int W = ctx->world, rank = ctx->rank;
  uint64_t R = grad.shape[0], F = grad.shape[1];
  size_t bytes = R * F * sizeof(float);
  if (bytes > s->bytes) {
    ctx->set_error(ctx, "grad_output larger than the receive buffer sized from the spec's R, F");
    return 1;
  }
  // 1. Rotated exchange: chunk (j - rank) mod W both ways with rank j.
  size_t chunk = bytes / W, count = chunk / sizeof(float);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    size_t at = (size_t)((j - rank + W) % W) * chunk;
    PKB_NCCL(ctx, ncclSend(static_cast<const char*>(grad.data) + at, count, ncclFloat32, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(reinterpret_cast<char*>(s->received) + at, count, ncclFloat32, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 2. Zero the result, then add every received row into its seed row.
  PKB_CUDA(ctx, cudaMemsetAsync(result.data, 0, (size_t)pkb_numel(&result) * sizeof(float), ctx->stream));
  return launch_scatter_add(ctx, s->received, static_cast<const int64_t*>(ids.data), static_cast<float*>(result.data),
                            R, F);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->received));
  delete s;
  ctx->user = nullptr;
  return 0;
}
