// pkb-expect: mismatch
// pkb-problem: 1
// Lookahead: while running call i, also reduce the other input set (where the next call's inputs
// will sit) into a private buffer, and at call i+1 return that precomputed result at the cost of a
// copy. (Here the precomputation runs inside the call, to keep the case simple; an attack would
// hide it between calls.) It is right when the next call's inputs already exist during this one
// (inputs generated ahead in rotating groups, as pkb did before 2026-12-02); pkb generates a timed
// call's inputs only after the previous call was committed, from a seed sent then, so the other set
// still holds an earlier call's inputs and the precomputed answer is wrong.
#include <pkb/solution.h>

#include <map>

namespace {
struct Ahead {
  void* result = nullptr;  // the all-reduce of `source`, computed during an earlier call
  const void* source = nullptr;
  bool valid = false;
};
std::map<const void*, Ahead> ahead;  // by input pointer
const void* last_input = nullptr;
int calls = 0;
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  long long n = pkb_numel(&in[0]);
  size_t bytes = static_cast<size_t>(n) * pkb_dtype_size(in[0].dtype);
  ncclDataType_t t = pkb_nccl_dtype(in[0].dtype);
  auto hit = ahead.find(in[0].data);
  if (++calls > 2 && hit != ahead.end() && hit->second.valid) {  // after the trials (--trials 2)
    PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, hit->second.result, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  } else {
    PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, t, ncclSum, ctx->comm, ctx->stream));
  }
  // Precompute for the other input set, as if it held the next call's inputs.
  if (last_input && last_input != in[0].data) {
    Ahead& a = ahead[last_input];
    if (!a.result) PKB_CUDA(ctx, cudaMalloc(&a.result, bytes));
    PKB_NCCL(ctx, ncclAllReduce(last_input, a.result, n, t, ncclSum, ctx->comm, ctx->stream));
    a.valid = true;
  }
  last_input = in[0].data;
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  for (auto& [k, a] : ahead) cudaFree(a.result);
  ahead.clear();
  return 0;
}
