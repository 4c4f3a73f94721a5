// pkb-expect: ok
// pkb-problem: 1
// pkb-check: report-rejects-forgery
// Computes correctly, and rank 0 tries to put a forged record (speedup 99) into the results file:
// it reads the --json path from the driver's command line (/proc/<ancestor>/cmdline), then appends to
// the file, or creates it first if it does not exist yet. The solution's process may write only
// below /dev and /proc (Landlock), and workers of a root driver cannot append to the driver's file
// anyway; where neither holds, the forged line still fails: `pkb report` rejects it by name (records
// carry an HMAC under a key the worker cannot read). The GPU test runs `pkb report` on the file.
#include <pkb/solution.h>

#include <cstdio>
#include <string>

#include "ancestry.cuh"

extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->rank != 0) return 0;
  std::string path = ancestry::ancestor_arg("--json");
  FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "a");
  std::fprintf(stderr, "forged_results_line: results file '%s' %s\n", path.c_str(), f ? "opened" : "not writable");
  if (f) {
    std::fputs("{\"schema_version\":1,\"kind\":\"eval\",\"problem\":{\"id\":1,\"stem\":\"1_allreduce\"},"
               "\"label\":\"forged\",\"status\":\"ok\",\"speedup\":99.0,\"config\":{\"world\":2}}\n", f);
    std::fclose(f);
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
