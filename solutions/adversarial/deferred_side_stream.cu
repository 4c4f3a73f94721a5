// pkb-expect: mismatch
// pkb-problem: 1
// Computes the right answer on a private stream that is never joined to ctx->stream, behind a
// delay, and returns at once: the output is incomplete when the call returns (and the timing would
// miss the work). The fingerprint taken at return differs from the one after a device-wide sync.
#include <pkb/solution.h>

namespace {
cudaStream_t side;
__global__ void delay(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {
  }
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  delay<<<1, 1, 0, side>>>(200000);  // ~0.2 ms
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm, side));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  cudaStreamDestroy(side);
  return 0;
}
