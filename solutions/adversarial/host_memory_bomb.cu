// pkb-expect: crash
// pkb-problem: 1
// pkb-requires: cgroup
// pkb-env: PKB_JOB_MEMORY_GB=8
// Allocates and touches host memory until something gives: the job's cgroup memory limit kills it
// (it must not take the machine down). RLIMIT_AS is never used: it breaks CUDA.
#include <pkb/solution.h>

#include <cstdlib>
#include <cstring>

extern "C" int pkb_init(pkb_context*) {
  for (;;) {
    char* p = static_cast<char*>(std::malloc(1u << 30));
    if (!p) std::abort();
    std::memset(p, 1, 1u << 30);
  }
}
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }
extern "C" int pkb_finalize(pkb_context*) { return 0; }
