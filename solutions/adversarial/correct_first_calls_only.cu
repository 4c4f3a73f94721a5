// pkb-expect: mismatch
// pkb-problem: 1
// Correct for its first 8 calls (every correctness trial of a naive harness), then writes zeros:
// pkb checks every timed call, not only the first.
#include <pkb/solution.h>

namespace {
int calls = 0;
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (++calls > 8) {
    PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0, pkb_numel(&out[0]) * pkb_dtype_size(out[0].dtype), ctx->stream));
    return 0;
  }
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
