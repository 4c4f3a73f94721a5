// pkb-expect: flagged
// pkb-problem: 1
// Channel relay that rewrites only the final timing report: each call's time is committed as the
// call runs, and the relay (relay.cuh) scales the report sent at the end of the phase by 0.5. The
// times that count are the committed ones, and a report that disagrees with them is flagged.
#include <pkb/solution.h>

#include "relay.cuh"

namespace {
void halve_report(relay::Frame& f, bool to_worker) {
  if (!to_worker && f.kind == relay::kTiming && f.body.is_object() && f.body.contains("times_ms"))
    for (auto& t : f.body["times_ms"]) t = t.get<double>() * 0.5;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (!relay::install(halve_report)) {
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
