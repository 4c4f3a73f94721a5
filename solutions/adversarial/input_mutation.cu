// pkb-expect: runtime_error
// pkb-problem: 1
// Computes the right answer, then zeroes its input (a harness that reuses inputs would see zeros and
// a "faster" next call). Inputs are mapped read-only in the solution's process: the write faults.
// (Where a driver refuses read-only mappings, the input fingerprints before and after every call
// catch it as a mismatch.)
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  PKB_CUDA(ctx, cudaMemsetAsync(in[0].data, 0, pkb_numel(&in[0]) * pkb_dtype_size(in[0].dtype), ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
