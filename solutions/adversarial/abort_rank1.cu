// pkb-expect: crash
// pkb-problem: 1
// Rank 1 aborts in its first call while rank 0 waits inside an all-reduce: the crash must be charged
// to rank 1 and the whole job torn down.
#include <pkb/solution.h>

#include <cstdlib>

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (ctx->rank == 1) std::abort();
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  PKB_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
