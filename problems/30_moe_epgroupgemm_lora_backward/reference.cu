// Baseline for problem 30 (LoRA-factor gradient sync after the EP group-GEMM backward). PKB issues one
// dist.all_reduce (sum, in place) per gradient, in the order fc1_1 A, fc1_2 A, fc2 B, and returns the
// three inputs. Here: the same three ncclAllReduce calls, one after the other on ctx->stream (not
// grouped, as ProcessGroupNCCL issues them), each from the input straight into its output; the inputs
// are left as they are (the spec marks them mutable, so a solution may reduce in place instead).
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int n_in, pkb_tensor* out, int n_out) {
  if (n_in != 3 || n_out != 3) PKB_FAIL_(ctx, "pkb_run", "expected 3 inputs and 3 outputs");
  const ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  for (int i = 0; i < 3; ++i)
    PKB_NCCL(ctx, ncclAllReduce(in[i].data, out[i].data, (size_t)pkb_numel(&in[i]), dt, ncclSum, ctx->comm,
                                ctx->stream));
  return 0;
}

extern "C" int pkb_finalize(pkb_context*) { return 0; }
