// pkb-expect: protocol_error
// pkb-problem: 1
// As relay_patched_after_commit, and the relay also tells the worker that no call is fully
// checked (it rewrites "full" in the driver's answers), so the worker never sends a fully checked
// call's bytes. The driver knows which calls it chose: a report without their bytes is not what
// its plan says, a protocol error.
#include "patch_after_commit.cuh"

extern "C" int pkb_init(pkb_context* ctx) { return patch::init(ctx, true); }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) { return patch::run(ctx, in, out); }
extern "C" int pkb_finalize(pkb_context*) {
  relay::drain();
  return 0;
}
