// pkb-expect: flagged
// pkb-problem: 1
// Work after the commit (patch_after_commit.cuh): each timed call returns zeros at once; a relay on
// the control channel holds the driver's answer until it has computed the real result into the
// output, so the sampled values are right, and it rewrites the report's after-sync fingerprints to
// the committed ones. The fully checked calls (chosen in secret, revealed only after the commit)
// send bytes that do not hash to the committed fingerprint: flagged. (With one GPU per rank the
// hidden work also shows as overhead on the driver's clock.)
#include "patch_after_commit.cuh"

extern "C" int pkb_init(pkb_context* ctx) { return patch::init(ctx, false); }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) { return patch::run(ctx, in, out); }
extern "C" int pkb_finalize(pkb_context*) {
  relay::drain();
  return 0;
}
