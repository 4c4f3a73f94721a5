// pkb-expect: flagged
// pkb-expect-shared: ok
// pkb-warning-shared: timing vs the driver's clock
// pkb-problem: 1
// pkb-args: --size large
// Channel relay that halves the times: the solution puts itself between its worker and the driver
// (relay.cuh) and scales every timed call's commit, and the final report, by 0.5: the baseline's
// own code claiming 2x. The commits and the report agree and fit inside the GPU span, but the
// driver's own clock around each call (from its grant to the commit) is not the worker's to
// rewrite: the half that was hidden reappears as per-call overhead far above the baseline's, and
// the run is flagged. With ranks sharing a GPU that comparison is a warning only (the socket
// transport's jitter), so there the run is ok and must carry the warning. Calls must be long
// enough for the hidden half to exceed the margin (1.5x the baseline's overhead + 100 us): the
// large class (128 MiB per rank) takes ~0.5 ms per call on NVLink.
#include <pkb/solution.h>

#include "relay.cuh"

namespace {
void halve_times(relay::Frame& f, bool to_worker) {
  if (to_worker || !f.body.is_object()) return;
  if (f.kind == relay::kCall && f.body.value("call", -1) >= 0 && f.body.contains("time_ms"))
    f.body["time_ms"] = f.body["time_ms"].get<double>() * 0.5;
  if (f.kind == relay::kTiming && f.body.contains("times_ms"))
    for (auto& t : f.body["times_ms"]) t = t.get<double>() * 0.5;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (!relay::install(halve_times)) {
    ctx->set_error(ctx, "could not take over the control channel");
    return 1;
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  relay::drain();  // the timing report must reach the driver before the worker exits
  return 0;
}
