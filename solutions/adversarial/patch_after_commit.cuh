// For relay_patched_after_commit: timed calls that skip their work (the output is zeroed, so nothing
// is left unwritten), and a channel relay (relay.cuh) that does the work after the call was
// committed and before the checker reads the sampled values: it holds the barrier that follows each
// timed call's commit, runs the real all-reduce into the call's output on a stream of its own, then
// lets the barrier through. The committed fingerprints are of the zeros; the checker fingerprints
// the outputs again after the barrier, in its own process, and the report it sends carries both.
#pragma once
#include <pkb/solution.h>

#include <mutex>
#include <string>
#include <vector>

#include "relay.cuh"

namespace patch {

struct State {
  std::mutex m;
  pkb_context* ctx = nullptr;
  cudaStream_t side = nullptr;
  bool timed = false;  // set by the first timed call's operation
  const void* in = nullptr;
  void* out = nullptr;
  long long n = 0;
  ncclDataType_t type = ncclBfloat16;
};
inline State state;

inline void hook(relay::Frame& f, bool to_worker) {
  if (!to_worker || f.kind != relay::kOp || !f.body.is_object()) return;
  std::lock_guard<std::mutex> lock(state.m);
  std::string op = f.body.value("op", "");
  if (op == "run" && f.body.value("timed", -1) >= 0) state.timed = true;
  if (op == "barrier" && state.timed && state.out) {  // do the skipped work now, before the samples are read
    cudaSetDevice(state.ctx->device);
    ncclAllReduce(state.in, state.out, state.n, state.type, ncclSum, state.ctx->comm, state.side);
    cudaStreamSynchronize(state.side);
  }
}

inline int init(pkb_context* ctx) {
  state.ctx = ctx;
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&state.side, cudaStreamNonBlocking));
  if (!relay::install(hook)) {
    ctx->set_error(ctx, "could not take over the control channel");
    return 1;
  }
  return 0;
}

inline int run(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  long long n = pkb_numel(&in[0]);
  ncclDataType_t t = pkb_nccl_dtype(in[0].dtype);
  bool timed;
  {
    std::lock_guard<std::mutex> lock(state.m);
    timed = state.timed;
    state.in = in[0].data;
    state.out = out[0].data;
    state.n = n;
    state.type = t;
  }
  if (timed) {
    PKB_CUDA(ctx, cudaMemsetAsync(out[0].data, 0, static_cast<size_t>(n) * pkb_dtype_size(out[0].dtype), ctx->stream));
  } else {
    PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, t, ncclSum, ctx->comm, ctx->stream));
  }
  return 0;
}

}  // namespace patch
