// pkb-expect: ok
// pkb-problem: 1
// pkb-warning: persisting-L2 limit
// Keeping inputs hot in L2: every call sets aside persisting L2 and marks its input as persisting,
// so that the next call's data (in pkb's recycled buffers) would hit in cache. The worker undoes a
// persisting-L2 limit before every timed call and the record says that the solution set one; the
// answer is right, so the run is ok, with that warning.
#include <pkb/solution.h>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t bytes = static_cast<size_t>(pkb_numel(&in[0])) * pkb_dtype_size(in[0].dtype);
  PKB_CUDA(ctx, cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 16u << 20));
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(in[0].data);
  attr.accessPolicyWindow.num_bytes = bytes < (16u << 20) ? bytes : (16u << 20);
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  PKB_CUDA(ctx, cudaStreamSetAttribute(ctx->stream, cudaStreamAttributeAccessPolicyWindow, &attr));
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
