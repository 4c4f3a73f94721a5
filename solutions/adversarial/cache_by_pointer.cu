// pkb-expect: mismatch
// pkb-problem: 1
// Caches results keyed on the input pointer: computes once per buffer, then replays the stored
// result whenever the same buffer comes back. Every call's inputs are new, so replays are stale.
#include <pkb/solution.h>

#include <map>

namespace {
std::map<const void*, void*> cache;
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t bytes = pkb_numel(&in[0]) * pkb_dtype_size(in[0].dtype);
  auto it = cache.find(in[0].data);
  if (it != cache.end()) {
    PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, it->second, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return 0;
  }
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  void* copy = nullptr;
  PKB_CUDA(ctx, cudaMalloc(&copy, bytes));
  PKB_CUDA(ctx, cudaMemcpyAsync(copy, out[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  cache[in[0].data] = copy;
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  for (auto& [k, v] : cache) cudaFree(v);
  cache.clear();
  return 0;
}
