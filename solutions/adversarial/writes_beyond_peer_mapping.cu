// pkb-expect: runtime_error
// pkb-problem: 1
// pkb-requires: symmetric
// Writes far past the end of its peer's symmetric mapping: the fault is reported with CUDA's own
// message, charged to the solution, and the job is torn down.
#include <pkb/solution.h>

namespace {
pkb_symmetric buf;
__global__ void scribble(char* peer, size_t offset) { peer[offset + threadIdx.x] = 1; }
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) { return ctx->symmetric_alloc(ctx, 1 << 20, &buf); }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor*, int, pkb_tensor*, int) {
  int peer = (ctx->rank + 1) % ctx->world;
  scribble<<<1, 32, 0, ctx->stream>>>(static_cast<char*>(buf.peers[peer]), 1ull << 40);  // 1 TiB past its start
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context* ctx) { return ctx->symmetric_free(ctx, &buf); }
