// pkb-expect: mismatch
// pkb-problem: 1
// One element short in every timed call: exact in the correctness trials, then after the trials
// (--trials 2) the all-reduce covers all but the last element. The output is poisoned with a fresh
// pattern before every call and the worker counts the elements still holding it when the call
// returns: an unwritten element is wrong even where the sampled positions miss it.
#include <pkb/solution.h>

namespace {
int calls = 0;
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  long long n = pkb_numel(&in[0]);
  if (++calls > 2) --n;
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm, ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
