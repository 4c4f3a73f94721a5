// Baseline for problem 3 (broadcast from root): one out-of-place ncclBroadcast. PKB clones the input
// and broadcasts in place; the out-of-place call moves the same bytes without the copy.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int root = static_cast<int>(ctx->param(ctx, "root", 0));
  PKB_NCCL(ctx, ncclBroadcast(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), root, ctx->comm,
                              ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
