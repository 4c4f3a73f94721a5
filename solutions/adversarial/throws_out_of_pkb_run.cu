// pkb-expect: runtime_error
// pkb-problem: 1
// An off-by-one std::vector::at in pkb_run: the exception leaves the C entry point. It is the
// solution's bug, so a runtime_error charged to it (it used to be recorded as harness_error, which
// pass@k does not count and resume retries).
#include <pkb/solution.h>

#include <vector>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  std::vector<int> shape(in[0].shape, in[0].shape + in[0].ndim);
  int rows = shape.at(in[0].ndim);  // one past the end: throws std::out_of_range
  (void)rows;
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
