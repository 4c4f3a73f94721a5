// pkb-expect: mismatch
// pkb-problem: 1
// Choosing its own inputs: the relay (relay.cuh) rewrites the seed in every answer from the driver
// to the first one it saw, so that every timed call regenerates the same inputs, and the solution
// computes the first timed call and copies that result afterwards. The inputs the worker made are
// no longer the baseline's, so neither are the outputs: the sampled values and the fully checked
// calls disagree with the baseline's calls.
#include <pkb/solution.h>

#include <mutex>
#include <string>

#include "relay.cuh"

namespace {
std::mutex m;
nlohmann::json first_seed;
bool timed = false;
void* cached = nullptr;
size_t cached_bytes = 0;

void repeat_seed(relay::Frame& f, bool to_worker) {
  if (!to_worker || f.kind != relay::kGrant || !f.body.is_object() || !f.body.contains("next_seed")) return;
  std::lock_guard<std::mutex> lock(m);
  if (f.body.value("call", -2) == -1) timed = true;
  if (first_seed.is_null()) first_seed = f.body["next_seed"];
  f.body["next_seed"] = first_seed;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (!relay::install(repeat_seed)) {
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
  relay::drain();  // the timing report must reach the driver before the worker exits
  return 0;
}
