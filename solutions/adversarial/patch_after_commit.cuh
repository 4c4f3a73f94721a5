// Shared by relay_patched_after_commit and relay_hidden_full_check: timed calls that skip their
// work (the output is zeroed, so nothing is left unwritten), and a channel relay (relay.cuh) that
// does the work after the call was committed and before the worker reads the sampled values: it
// holds each grant, runs the real all-reduce into the call's output on a stream of its own, then
// lets the grant through. The committed fingerprints are of the zeros; the relay copies them over
// the after-synchronisation fingerprints in the final report, so the two agree. What is left to
// catch it: the calls that turn out to be fully checked, whose bytes (right, but not the bytes
// that were committed) must match the committed fingerprint.
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
  bool timed = false;  // set when the driver answers "ready": the timed calls begin
  const void* in = nullptr;
  void* out = nullptr;
  long long n = 0;
  ncclDataType_t type = ncclBfloat16;
  std::vector<std::string> committed;  // output 0's fingerprint per timed call
  bool hide_full = false;              // also tell the worker that no call is fully checked
};
inline State state;

inline void hook(relay::Frame& f, bool to_worker) {
  if (!f.body.is_object()) return;
  std::lock_guard<std::mutex> lock(state.m);
  int call = f.body.value("call", -2);
  if (to_worker && f.kind == relay::kGrant) {
    if (call == -1) state.timed = true;
    if (call >= 0 && state.timed && state.out) {  // do the skipped work now, before the samples are read
      cudaSetDevice(state.ctx->device);
      ncclAllReduce(state.in, state.out, state.n, state.type, ncclSum, state.ctx->comm, state.side);
      cudaStreamSynchronize(state.side);
      if (state.hide_full) f.body["full"] = false;
    }
  }
  if (!to_worker && f.kind == relay::kCall && call >= 0) {
    if (state.committed.size() <= static_cast<size_t>(call)) state.committed.resize(call + 1);
    state.committed[call] = f.body["outputs"][0]["digest"].get<std::string>();
  }
  if (!to_worker && f.kind == relay::kTiming && f.body.contains("outputs")) {
    auto& digests = f.body["outputs"][0]["digests"];
    for (size_t i = 0; i < digests.size() && i < state.committed.size(); ++i) digests[i] = state.committed[i];
  }
}

inline int init(pkb_context* ctx, bool hide_full) {
  state.ctx = ctx;
  state.hide_full = hide_full;
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
