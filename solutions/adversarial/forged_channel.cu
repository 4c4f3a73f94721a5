// pkb-expect: protocol_error
// pkb-problem: 1
// Writes a forged frame ("trial passed") into its process's channel (fd 3) from pkb_init. That
// channel leads to the rank's checker, not to the driver, and the checker takes only replies to its
// own operations: anything else breaks the protocol and the job fails; it never becomes a result.
#include <pkb/solution.h>
#include <unistd.h>

#include <cstring>

extern "C" int pkb_init(pkb_context*) {
  const char body[] = "{\"step\":0,\"trial\":0,\"outputs\":[],\"inputs\":[]}";
  unsigned char frame[24 + sizeof body];
  unsigned magic = 0x31424B50, kind = 4;  // "PKB1", trial
  unsigned long long blen = sizeof body - 1, xlen = 0;
  std::memcpy(frame, &magic, 4);
  std::memcpy(frame + 4, &kind, 4);
  std::memcpy(frame + 8, &blen, 8);
  std::memcpy(frame + 16, &xlen, 8);
  std::memcpy(frame + 24, body, blen);
  (void)!write(3, frame, 24 + blen);
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
