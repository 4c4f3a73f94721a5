// pkb-expect: mismatch
// pkb-problem: 1
// A NaN in every timed call: exact in the correctness trials, then after the trials (--trials 2)
// the first element of each output is set to NaN. The worker counts non-finite elements when the
// call returns, before the call is committed; more than the baseline's call had is wrong.
#include <pkb/solution.h>

namespace {
int calls = 0;

__global__ void set_nan(void* p, int dtype) {
  if (dtype == PKB_FP32)
    *static_cast<unsigned*>(p) = 0x7FC00000u;
  else
    *static_cast<unsigned short*>(p) = dtype == PKB_BF16 ? 0x7FC0 : 0x7E00;
}
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  if (++calls > 2) {
    set_nan<<<1, 1, 0, ctx->stream>>>(out[0].data, out[0].dtype);
    PKB_LAUNCH(ctx);
  }
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
