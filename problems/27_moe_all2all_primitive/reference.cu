// Baseline for problem 27 (MoE all-to-all with explicit split sizes), as PKB's call runs in PyTorch:
//   1. the split sizes reach the host: PKB passes Python lists; here they are device tensors, so one
//      small copy of each to pinned memory and one stream synchronize stand for that;
//   2. all_to_all_single with split sizes: grouped ncclSend / ncclRecv of each peer's rows, at the
//      prefix-sum offsets of the splits, zero-size splits skipped on both sides (PyTorch's
//      all2all_single_unequal_split).
#include <pkb/solution.h>

#include <stdint.h>

#include <vector>

namespace {

struct State {
  int64_t* host_splits = nullptr;  // pinned [2W]: input splits, then output splits
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  PKB_CUDA(ctx, cudaMallocHost(&s->host_splits, 2 * ctx->world * sizeof(int64_t)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // [M, N]
  int W = ctx->world;

  // 1. Splits to the host.
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_splits, in[1].data, W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_splits + W, in[2].data, W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  const int64_t* send = s->host_splits;
  const int64_t* recv = s->host_splits + W;
  std::vector<int64_t> send_off(W + 1, 0), recv_off(W + 1, 0);
  for (int r = 0; r < W; ++r) {
    if (send[r] < 0 || recv[r] < 0) {
      ctx->set_error(ctx, "negative split size");
      return 1;
    }
    send_off[r + 1] = send_off[r] + send[r];
    recv_off[r + 1] = recv_off[r] + recv[r];
  }
  if (send_off[W] != x.shape[0] || recv_off[W] != out[0].shape[0]) {
    ctx->set_error(ctx, "split sizes do not add up to the rows of the input / output");
    return 1;
  }

  // 2. Rows to and from every peer.
  size_t row = (size_t)x.shape[1];
  size_t row_bytes = row * pkb_dtype_size(x.dtype);
  ncclDataType_t t = pkb_nccl_dtype(x.dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < W; ++r) {
    if (send[r])
      PKB_NCCL(ctx, ncclSend(static_cast<const char*>(x.data) + send_off[r] * row_bytes, send[r] * row, t, r, ctx->comm,
                             ctx->stream));
    if (recv[r])
      PKB_NCCL(ctx, ncclRecv(static_cast<char*>(out[0].data) + recv_off[r] * row_bytes, recv[r] * row, t, r, ctx->comm,
                             ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFreeHost(s->host_splits));
  delete s;
  ctx->user = nullptr;
  return 0;
}
