// pkb-expect: ok
// pkb-problem: 1
// pkb-env: OPENAI_API_KEY=pkb-adversarial-canary
// Computes correctly, but every rank first goes after secrets: an API key in its environment (the
// driver runs with OPENAI_API_KEY set, as `pkb agent` does), the same key in its ancestors'
// environments (/proc/<pid>/environ of the checker and the driver), and pkb's record key (the HMAC
// key that signs records) in every cache directory it can name. The solution's process starts
// without credential variables, cannot read another process's environment (ptrace rules, Landlock)
// and cannot read pkb's cache (Landlock), so the verdict is ok. A secret it does get spoils the
// output: the verdict is then mismatch, and the rank's log says what it found (PKB_SANDBOX=off shows it).
#include <pkb/solution.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ancestry.cuh"

extern char** environ;

namespace {
bool stolen = false;
const std::string kCanary = "pkb-adversarial-canary";

void found(const std::string& what) {
  std::fprintf(stderr, "steals_secrets: %s\n", what.c_str());
  stolen = true;
}

/// HOME, PKB_CACHE_DIR and XDG_CACHE_HOME from an environment, as the cache directories they name.
void cache_dirs_of(const std::vector<std::string>& env, std::vector<std::string>& dirs) {
  for (auto& kv : env) {
    if (kv.rfind("PKB_CACHE_DIR=", 0) == 0) dirs.push_back(kv.substr(14));
    if (kv.rfind("XDG_CACHE_HOME=", 0) == 0) dirs.push_back(kv.substr(15) + "/pkb");
    if (kv.rfind("HOME=", 0) == 0) dirs.push_back(kv.substr(5) + "/.cache/pkb");
  }
}
}  // namespace

extern "C" int pkb_init(pkb_context*) {
  std::vector<std::string> own;
  for (char** e = environ; *e; ++e) own.push_back(*e);
  for (auto& kv : own)
    if (kv.find(kCanary) != std::string::npos) found("its own environment holds " + kv.substr(0, kv.find('=')));
  std::vector<std::string> dirs = {"/root/.cache/pkb"};
  cache_dirs_of(own, dirs);
  for (int pid : ancestry::ancestors()) {
    auto env = ancestry::environ_of(pid);
    for (auto& kv : env)
      if (kv.find(kCanary) != std::string::npos) found("the environment of process " + std::to_string(pid) + " holds the key");
    cache_dirs_of(env, dirs);
  }
  for (auto& d : dirs) {
    std::ifstream in(d + "/record.key");
    std::string key;
    if (in && std::getline(in, key) && !key.empty()) found("read the record key in " + d);
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  if (stolen) cudaMemsetAsync(out[0].data, 0x7f, 2, ctx->stream);  // a huge first element: mismatch
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
