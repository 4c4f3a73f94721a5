// pkb-expect: timeout
// pkb-problem: 1
// pkb-args: --timeout 5
// Every rank spins on a flag nobody sets: the job must be killed at the deadline, leaving nothing.
#include <pkb/solution.h>

__global__ void spin(volatile int* flag) {
  while (*flag == 0) {
  }
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor*, int, pkb_tensor* out, int) {
  PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0, 4, ctx->stream));
  spin<<<1, 1, 0, ctx->stream>>>(static_cast<volatile int*>(out[0].data));
  PKB_LAUNCH(ctx);
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
