// pkb-expect: mismatch
// pkb-problem: 1
// An all-reduce that adds one to every element: plausible-looking, wrong everywhere.
#include <pkb/solution.h>

#include <cuda_bf16.h>

__global__ void add_one(__nv_bfloat16* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(__bfloat162float(p[i]) + 1.0f);
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t n = pkb_numel(&in[0]);
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream));
  add_one<<<128, 256, 0, ctx->stream>>>(static_cast<__nv_bfloat16*>(out[0].data), n);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
