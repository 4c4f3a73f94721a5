// pkb-expect: protocol_error
// pkb-problem: 1
// Sends a well-formed frame of the kind a worker uses for trial results, in the right phase
// ("trial 0": it announces it first), but without the "outputs" the checks read, into its
// process's channel (fd 3). The channel leads to the rank's checker, which takes only replies to its
// own operations (and the driver validates every frame against its schema and phase): a
// protocol_error charged to the candidate.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstring>

namespace {
void frame(unsigned kind, const char* body) {
  unsigned char buf[256];
  unsigned magic = 0x31424B50;
  unsigned long long bl = std::strlen(body), xl = 0;
  std::memcpy(buf, &magic, 4);
  std::memcpy(buf + 4, &kind, 4);
  std::memcpy(buf + 8, &bl, 8);
  std::memcpy(buf + 16, &xl, 8);
  std::memcpy(buf + 24, body, bl);
  (void)!write(3, buf, 24 + bl);
}
bool sent = false;
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (!sent) {  // the first call is trial 0's
    sent = true;
    frame(4, "{\"step\":0,\"trial\":0,\"inputs\":[]}");  // kind 4: trial
  }
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
