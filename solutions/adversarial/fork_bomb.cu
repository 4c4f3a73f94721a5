// pkb-expect: crash
// pkb-problem: 1
// pkb-requires: cgroup
// Forks until fork fails (the job's cgroup caps its tasks), then aborts; every child dies with the job.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstdlib>

extern "C" int pkb_init(pkb_context*) {
  for (;;) {
    pid_t p = fork();
    if (p == 0) {
      for (;;) pause();
    }
    if (p < 0) std::abort();
  }
}
extern "C" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }
extern "C" int pkb_finalize(pkb_context*) { return 0; }
