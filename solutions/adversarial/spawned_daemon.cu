// pkb-expect: flagged
// pkb-problem: 1
// pkb-requires: cgroup
// Computes correctly, but rank 0 starts a daemon (setsid: out of the job's process group) that would
// outlive the job and could disturb the next one. The job's cgroup still holds it: it is counted,
// killed, and the run is flagged.
#include <pkb/solution.h>
#include <unistd.h>

extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->rank == 0 && fork() == 0) {
    setsid();
    for (int fd = 0; fd < 1024; ++fd) close(fd);
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
