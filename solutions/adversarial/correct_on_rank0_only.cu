// pkb-expect: mismatch
// pkb-problem: 1
// Correct on rank 0 (the rank a naive harness checks), garbage elsewhere: pkb checks every rank.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  if (ctx->rank != 0)
    PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0x3c, pkb_numel(&out[0]) * pkb_dtype_size(out[0].dtype), ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
