// pkb-expect: ok
// pkb-problem: 1
// pkb-max-speedup: 1.5
// Exports its own cudaEventElapsedTime and cudaEventRecord reporting near-zero times, hoping the
// harness binds to them. Workers resolve CUDA before loading a solution, and the solution is loaded
// RTLD_LOCAL, so the interposition has no effect: the run is honest and timed honestly (and a time
// below the roofline floor would be flagged anyway).
#include <pkb/solution.h>

extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 1e-6f;
  return cudaSuccess;
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
