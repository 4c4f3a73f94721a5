// pkb-expect: ok
// pkb-problem: 1
// Computes correctly, but every rank first tries to create files where a candidate has no business
// writing: /tmp (other jobs' files, the results file's directory), the directory of its own source
// file (the solutions and problem folders), pkb's cache, and the workers' home. The solution's process
// may write only below /dev and /proc (Landlock), so every attempt fails and the verdict is ok. A
// write that succeeds is removed again and spoils the output: the verdict is then mismatch, and the
// rank's log names the path (run it with PKB_SANDBOX=off to see that).
#include <pkb/solution.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ancestry.cuh"

namespace {
bool escaped = false;

void try_create(const std::string& dir) {
  if (dir.empty()) return;
  std::string path = dir + "/pkb-adversarial-" + std::to_string(getpid());
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  close(fd);
  unlink(path.c_str());
  std::fprintf(stderr, "writes_outside_sandbox: created %s\n", path.c_str());
  escaped = true;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

extern "C" int pkb_init(pkb_context*) {
  std::vector<std::string> dirs = {"/tmp", env("HOME"), env("PKB_CACHE_DIR")};
  if (!env("HOME").empty()) dirs.push_back(env("HOME") + "/.cache/pkb");
  if (!env("XDG_CACHE_HOME").empty()) dirs.push_back(env("XDG_CACHE_HOME") + "/pkb");
  std::string source = ancestry::ancestor_arg("--solution");
  if (auto slash = source.rfind('/'); slash != std::string::npos) dirs.push_back(source.substr(0, slash));
  std::string results = ancestry::ancestor_arg("--json");
  if (auto slash = results.rfind('/'); slash != std::string::npos) dirs.push_back(results.substr(0, slash));
  for (auto& d : dirs) try_create(d);
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  if (escaped) cudaMemsetAsync(out[0].data, 0x7f, 2, ctx->stream);  // a huge first element: mismatch
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
