// pkb-expect: mismatch
// pkb-problem: 1
// Returns its own input: right only if the other ranks held zeros, which they never do.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, in[0].data, pkb_numel(&in[0]) * pkb_dtype_size(in[0].dtype),
                                cudaMemcpyDeviceToDevice, ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
