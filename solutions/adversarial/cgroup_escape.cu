// pkb-expect: flagged
// pkb-problem: 1
// pkb-requires: cgroup
// Computes correctly, but rank 0 starts a daemon that moves itself into the root cgroup (and, failing
// that, into every cgroup it can find writable) to outlive the job and slow the next one. Workers of
// a root driver run as an unprivileged user: the cgroup files are not theirs, the daemon stays in
// the job's cgroup, is counted, killed, and the run is flagged.
#include <pkb/solution.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {
bool join(const char* procs) {
  int fd = open(procs, O_WRONLY);
  if (fd < 0) return false;
  char pid[24];
  int n = snprintf(pid, sizeof pid, "%d", getpid());
  bool ok = write(fd, pid, static_cast<size_t>(n)) == n;
  close(fd);
  return ok;
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->rank == 0 && fork() == 0) {
    setsid();
    for (int fd = 0; fd < 1024; ++fd) close(fd);
    if (!join("/sys/fs/cgroup/cgroup.procs")) join("/sys/fs/cgroup/user.slice/cgroup.procs");
    for (;;) pause();
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
