// pkb-expect: mismatch
// pkb-problem: 1
// pkb-requires: symmetric
// Rank 0 overwrites rank 1's staged input with garbage between the two barriers of a one-shot
// all-reduce. No harness state lives in a symmetric buffer, so the only victim is the solution's own
// result, which the checks reject.
#include <pkb/solution.h>

#include <cuda_bf16.h>

namespace {
pkb_symmetric buf;

__global__ void oneshot_with_scribble(ncclDevComm dc, ncclWindow_t win, const __nv_bfloat16* in, __nv_bfloat16* out, size_t n,
                                      int rank) {
  __nv_bfloat16* mine = static_cast<__nv_bfloat16*>(ncclGetLocalPointer(win, 0));
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) mine[i] = in[i];
  {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), 0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
  if (rank == 0) {
    __nv_bfloat16* victim = static_cast<__nv_bfloat16*>(ncclGetLsaPointer(win, 0, 1));
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) victim[i] = __float2bfloat16(12345.0f);
  }
  {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), 0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < dc.lsaSize; ++p) s += __bfloat162float(static_cast<const __nv_bfloat16*>(ncclGetLsaPointer(win, 0, p))[i]);
    out[i] = __float2bfloat16(s);
  }
  {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), 0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
}
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  return ctx->symmetric_alloc(ctx, ctx->param(ctx, "M", 0) * ctx->param(ctx, "N", 0) * 2, &buf);
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  oneshot_with_scribble<<<1, 512, 0, ctx->stream>>>(*ctx->devcomm, buf.window, static_cast<const __nv_bfloat16*>(in[0].data),
                                                    static_cast<__nv_bfloat16*>(out[0].data), pkb_numel(&in[0]), ctx->rank);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context* ctx) { return ctx->symmetric_free(ctx, &buf); }
