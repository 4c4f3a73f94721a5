// Baseline for problem 5 (scatter from root): grouped point-to-point sends from the root, as
// PyTorch's ProcessGroupNCCL implements scatter; the root copies its own chunk locally.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  size_t n = pkb_numel(&out[0]);
  size_t bytes = n * pkb_dtype_size(out[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(out[0].dtype);
  PKB_NCCL(ctx, ncclGroupStart());
  if (ctx->rank == root) {
    for (int r = 0; r < ctx->world; ++r) {
      const char* chunk = static_cast<const char*>(in[0].data) + r * bytes;
      if (r == root)
        PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, chunk, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
      else
        PKB_NCCL(ctx, ncclSend(chunk, n, t, r, ctx->comm, ctx->stream));
    }
  } else {
    PKB_NCCL(ctx, ncclRecv(out[0].data, n, t, root, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
