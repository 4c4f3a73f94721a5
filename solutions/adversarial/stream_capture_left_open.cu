// pkb-expect: runtime_error
// pkb-problem: 1
// Returning with the harness's stream in capture: the call begins a CUDA graph capture on
// ctx->stream and "launches" the all-reduce into it, so nothing runs, then returns without ending
// the capture, hoping the harness's events and checks are captured too and time nothing. The
// harness's next synchronisation fails on a capturing stream; the error comes after the solution
// was loaded, in its call, so it is the solution's runtime_error, on that rank.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_CUDA(ctx, cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeGlobal));
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
