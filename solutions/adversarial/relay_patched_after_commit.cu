// pkb-expect: mismatch
// pkb-problem: 1
// Work after the commit (patch_after_commit.cuh): each timed call returns zeros at once; a relay on
// the channel of the solution's process holds the barrier after each commit until it has computed
// the real result into the output, so the sampled values are right. The checker fingerprints every
// output at return and again after the barrier, in a process the solution cannot reach: the two
// differ (the output changed after the call returned), a mismatch.
#include "patch_after_commit.cuh"

extern "C" int pkb_init(pkb_context* ctx) { return patch::init(ctx); }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) { return patch::run(ctx, in, out); }
extern "C" int pkb_finalize(pkb_context*) {
  relay::drain();
  return 0;
}
