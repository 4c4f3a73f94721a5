// pkb-expect: mismatch
// pkb-problem: 1
// Writes a constant (zeros) instead of computing: inputs are random, so no constant is right.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor*, int, pkb_tensor* out, int) {
  PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0, pkb_numel(&out[0]) * pkb_dtype_size(out[0].dtype), ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
