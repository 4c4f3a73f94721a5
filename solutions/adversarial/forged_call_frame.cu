// pkb-expect: protocol_error
// pkb-problem: 1
// After the correctness trials, every call writes its own timed-call commit into its process's
// channel (fd 3), claiming 1 us. Commits are the checker's to send; the channel leads to the
// checker, which takes only replies to its own operations: the forged frame breaks the protocol.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {
int calls = 0;
int timed = -1;

void forge_commit(int call) {
  char body[160];
  int n = std::snprintf(body, sizeof body,
                        "{\"step\":0,\"call\":%d,\"time_ms\":0.001,\"outputs\":[{\"digest\":\"0\",\"unwritten\":0,"
                        "\"nonfinite\":0}]}",
                        call);
  unsigned char frame[24 + sizeof body];
  unsigned magic = 0x31424B50, kind = 9;  // "PKB1", call
  unsigned long long blen = static_cast<unsigned long long>(n), xlen = 0;
  std::memcpy(frame, &magic, 4);
  std::memcpy(frame + 4, &kind, 4);
  std::memcpy(frame + 8, &blen, 8);
  std::memcpy(frame + 16, &xlen, 8);
  std::memcpy(frame + 24, body, blen);
  (void)!write(3, frame, 24 + blen);
}
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (++calls > 2) forge_commit(++timed);  // the trials (--trials 2) first, then every call
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
