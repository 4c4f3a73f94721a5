// pkb-expect: flagged
// pkb-expect-shared: ok
// pkb-warning-shared: timing vs the driver's clock
// pkb-problem: 1
// pkb-args: --size large
// Channel relay that halves the times: the solution puts itself between its process and the rank's
// checker (relay.cuh) and scales every call's event time, and the GPU span of the timed calls, by
// 0.5: the baseline's own code claiming 2x. The times still fit inside the checker's clock around
// each call and the span, but the driver's own clock around each call (from its grant to the
// commit) is not the solution's to rewrite: the half that was hidden reappears as per-call overhead far above the baseline's, and
// the run is flagged. With ranks sharing a GPU that comparison is a warning only (the socket
// transport's jitter), so there the run is ok and must carry the warning. Calls must be long
// enough for the hidden half to exceed the margin (1.5x the baseline's overhead + 100 us): the
// large class (128 MiB per rank) takes ~0.5 ms per call on NVLink.
#include <pkb/solution.h>

#include "relay.cuh"

namespace {
void halve_times(relay::Frame& f, bool to_worker) {
  if (to_worker || f.kind != relay::kReply || !f.body.is_object()) return;
  if (f.body.value("stage", "") == "finished" && f.body.contains("ms")) f.body["ms"] = f.body["ms"].get<double>() * 0.5;
  if (f.body.contains("span_ms")) f.body["span_ms"] = f.body["span_ms"].get<double>() * 0.5;
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
  relay::drain();  // every reply must reach the checker before this process exits
  return 0;
}
