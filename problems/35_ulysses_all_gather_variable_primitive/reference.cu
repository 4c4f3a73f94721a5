// Baseline for problem 35 (all-gather of variable-size shards), PKB's two steps as PyTorch runs them:
//   1. shapes: the 2-element int64 shape of x is copied to the device (torch.tensor(x.size())),
//      all-gathered (one ncclAllGather of 2 int64), and brought back to the host (PKB's .tolist(),
//      here one copy and one stream synchronize instead of one per rank);
//   2. data: PyTorch's ProcessGroupNCCL::allgather, given output tensors of unequal sizes, falls
//      back to a coalesced group of ncclBroadcast calls, one per root rank i with rank i's shard
//      (empty shards skipped here; every rank knows the sizes, so all skip alike).
// PKB then concatenates the per-rank buffers along rows; a row concatenation is the identity on
// contiguous memory, so each broadcast lands directly in its slice of the output (PyTorch's extra
// torch.cat copy is left out, which only makes the baseline faster).
#include <pkb/solution.h>

#include <stdint.h>

#include <vector>

namespace {

struct State {
  int64_t* host_shape = nullptr;   // pinned [2]: this rank's shape
  int64_t* host_shapes = nullptr;  // pinned [W][2]: every rank's shape
  int64_t* dev_shape = nullptr;    // [2]
  int64_t* dev_shapes = nullptr;   // [W][2]
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  int W = ctx->world;
  PKB_CUDA(ctx, cudaMallocHost(&s->host_shape, 2 * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host_shapes, 2 * W * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->dev_shape, 2 * sizeof(int64_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->dev_shapes, 2 * W * sizeof(int64_t)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];
  int W = ctx->world;

  // 1. Exchange shapes. (The previous call's copy out of host_shape finished at its synchronize.)
  s->host_shape[0] = x.shape[0];
  s->host_shape[1] = x.shape[1];
  PKB_CUDA(ctx, cudaMemcpyAsync(s->dev_shape, s->host_shape, 2 * sizeof(int64_t), cudaMemcpyHostToDevice, ctx->stream));
  PKB_NCCL(ctx, ncclAllGather(s->dev_shape, s->dev_shapes, 2, ncclInt64, ctx->comm, ctx->stream));
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host_shapes, s->dev_shapes, 2 * W * sizeof(int64_t), cudaMemcpyDeviceToHost, ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));

  std::vector<int64_t> offset(W + 1, 0);  // row offsets of each rank's shard in the output
  for (int i = 0; i < W; ++i) {
    if (s->host_shapes[2 * i + 1] != out[0].shape[1]) {
      ctx->set_error(ctx, "a rank's shard has a different row width");
      return 1;
    }
    offset[i + 1] = offset[i] + s->host_shapes[2 * i];
  }
  if (offset[W] != out[0].shape[0]) {
    ctx->set_error(ctx, "the gathered row counts do not add up to the output's rows");
    return 1;
  }

  // 2. One broadcast per root, straight into the root's slice of the output.
  size_t row = (size_t)out[0].shape[1];
  size_t row_bytes = row * pkb_dtype_size(out[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(out[0].dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  for (int i = 0; i < W; ++i) {
    size_t rows = (size_t)(offset[i + 1] - offset[i]);
    if (rows == 0) continue;
    char* slice = static_cast<char*>(out[0].data) + offset[i] * row_bytes;
    const void* send = i == ctx->rank ? x.data : slice;
    PKB_NCCL(ctx, ncclBroadcast(send, slice, rows * row, t, i, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFreeHost(s->host_shape));
  PKB_CUDA(ctx, cudaFreeHost(s->host_shapes));
  PKB_CUDA(ctx, cudaFree(s->dev_shape));
  PKB_CUDA(ctx, cudaFree(s->dev_shapes));
  delete s;
  ctx->user = nullptr;
  return 0;
}
