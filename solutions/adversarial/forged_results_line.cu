// pkb-expect: ok
// pkb-problem: 1
// pkb-check: report-rejects-forgery
// Computes correctly, and rank 0 tries to put a forged record (speedup 99) into the results file:
// it reads the --json path from the driver's command line (/proc/<parent>/cmdline), then appends to
// the file, or creates it first if it does not exist yet. Workers of a root driver cannot append to
// the driver's file; a file the candidate created itself still gets the driver's signed record, and
// `pkb report` rejects the forged line by name (records carry an HMAC under a key the worker cannot
// read). The GPU test runs `pkb report` on the file and checks that.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {
std::string results_path() {
  std::ifstream in("/proc/" + std::to_string(getppid()) + "/cmdline", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> args;
  std::string a;
  for (char c : ss.str()) {
    if (c) a += c;
    else { args.push_back(a); a.clear(); }
  }
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--json") return args[i + 1];
  return "";
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->rank != 0) return 0;
  std::string path = results_path();
  if (FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "a")) {
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
