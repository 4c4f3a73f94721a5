// pkb-expect: runtime_error
// pkb-problem: 1
// A kernel writes through a wild pointer: the sticky CUDA error must be reported with its text.
#include <pkb/solution.h>

__global__ void wild(float* p) { p[threadIdx.x] = 1.0f; }

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor*, int, pkb_tensor*, int) {
  wild<<<1, 32, 0, ctx->stream>>>(reinterpret_cast<float*>(0x10));
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
