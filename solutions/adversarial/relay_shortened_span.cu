// pkb-expect: flagged
// pkb-problem: 1
// Channel relay that shortens only the GPU span of the timed calls (the interval from the first
// call's start to the last call's stop, which the runner measures): the relay (relay.cuh) cuts it to
// 1 % on its way to the checker, shorter than the calls inside it. The calls' own times must fit
// inside the span: flagged. (Halving it is not enough: the gaps between calls, where the checker
// generates and checks, make the honest span several times the calls' sum.)
#include <pkb/solution.h>

#include "relay.cuh"

namespace {
void halve_span(relay::Frame& f, bool to_worker) {
  if (!to_worker && f.kind == relay::kReply && f.body.is_object() && f.body.contains("span_ms"))
    f.body["span_ms"] = f.body["span_ms"].get<double>() * 0.01;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (!relay::install(halve_span)) {
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
