// Baseline for problem 6 (gather to root): grouped point-to-point receives at the root, as
// PyTorch's ProcessGroupNCCL implements gather; non-root ranks return their own input (PKB).
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  size_t n = pkb_numel(&in[0]);
  size_t bytes = n * pkb_dtype_size(in[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(in[0].dtype);
  if (ctx->rank != root)
    PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  PKB_NCCL(ctx, ncclGroupStart());
  if (ctx->rank == root) {
    for (int r = 0; r < ctx->world; ++r) {
      char* slot = static_cast<char*>(out[0].data) + r * bytes;
      if (r == root)
        PKB_CUDA(ctx, cudaMemcpyAsync(slot, in[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
      else
        PKB_NCCL(ctx, ncclRecv(slot, n, t, r, ctx->comm, ctx->stream));
    }
  } else {
    PKB_NCCL(ctx, ncclSend(in[0].data, n, t, root, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
