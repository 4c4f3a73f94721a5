// pkb-expect: mismatch
// pkb-problem: 1
// Sums correctly but returns the result with 3 mantissa bits (fp8-like precision, cheaper to move):
// outside the tolerance for most elements.
#include <pkb/solution.h>

__global__ void truncate_bf16(unsigned short* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] &= 0xFFF0;  // keep sign, exponent and the top 3 of 7 mantissa bits
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t n = pkb_numel(&in[0]);
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream));
  truncate_bf16<<<128, 256, 0, ctx->stream>>>(static_cast<unsigned short*>(out[0].data), n);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
