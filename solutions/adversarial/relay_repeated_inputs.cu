// pkb-expect: mismatch
// pkb-problem: 1
// Choosing its own inputs: the solution never sees a seed (the checker generates every input), so
// the relay (relay.cuh) rewrites every timed call's operation to run on the input set of the first
// timed call, and the solution computes that call once and copies the result afterwards. The two
// input sets alternate and each is regenerated for its call: every other call then answers the
// previous call's inputs, and the sampled values disagree with the baseline's calls.
#include <pkb/solution.h>

#include <mutex>
#include <string>

#include "relay.cuh"

namespace {
std::mutex m;
int first_set = -1;
bool timed = false;
void* cached = nullptr;
size_t cached_bytes = 0;

void repeat_set(relay::Frame& f, bool to_worker) {
  if (!to_worker || f.kind != relay::kOp || !f.body.is_object() || f.body.value("op", "") != "run" ||
      f.body.value("timed", -1) < 0)
    return;
  std::lock_guard<std::mutex> lock(m);
  timed = true;
  if (first_set < 0) first_set = f.body["in"].get<int>();
  f.body["in"] = first_set;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (!relay::install(repeat_set)) {
    ctx->set_error(ctx, "could not take over the control channel");
    return 1;
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t bytes = static_cast<size_t>(pkb_numel(&out[0])) * pkb_dtype_size(out[0].dtype);
  bool is_timed;
  {
    std::lock_guard<std::mutex> lock(m);
    is_timed = timed;
  }
  if (is_timed && cached && cached_bytes == bytes) {
    PKB_CUDA(ctx, cudaMemcpyAsync(out[0].data, cached, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return 0;
  }
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  if (is_timed) {
    PKB_CUDA(ctx, cudaMalloc(&cached, bytes));
    cached_bytes = bytes;
    PKB_CUDA(ctx, cudaMemcpyAsync(cached, out[0].data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
  }
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  relay::drain();  // every reply must reach the checker before this process exits
  return 0;
}
