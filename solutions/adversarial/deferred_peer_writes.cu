// pkb-expect: mismatch
// pkb-problem: 1
// pkb-requires: symmetric
// A push all-reduce that never waits for its peers: each rank stores its input into every peer's
// landing slot after a delay, while the peers sum their landing zones at once, without a barrier.
// The call returns before the remote writes land; the sums read stale data.
#include <pkb/solution.h>

#include <cuda_bf16.h>

namespace {
pkb_symmetric buf;

__global__ void push_late(ncclWindow_t win, const __nv_bfloat16* in, size_t n, int rank, int world) {
  long long t0 = clock64();
  while (clock64() - t0 < 400000) {  // ~0.2 ms
  }
  for (int p = 0; p < world; ++p) {
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(ncclGetLsaPointer(win, rank * n * 2, p));
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = in[i];
  }
}

__global__ void sum_now(const __nv_bfloat16* land, __nv_bfloat16* out, size_t n, int world) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < world; ++p) s += __bfloat162float(land[p * n + i]);
    out[i] = __float2bfloat16(s);
  }
}

cudaStream_t side;
}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  size_t n = ctx->param(ctx, "M", 0) * ctx->param(ctx, "N", 0);
  PKB_CUDA(ctx, cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  return ctx->symmetric_alloc(ctx, n * 2 * ctx->world, &buf);
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  size_t n = pkb_numel(&in[0]);
  push_late<<<32, 256, 0, side>>>(buf.window, static_cast<const __nv_bfloat16*>(in[0].data), n, ctx->rank, ctx->world);
  sum_now<<<32, 256, 0, ctx->stream>>>(static_cast<const __nv_bfloat16*>(buf.local), static_cast<__nv_bfloat16*>(out[0].data), n,
                                      ctx->world);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context* ctx) {
  cudaStreamSynchronize(side);
  cudaStreamDestroy(side);
  return ctx->symmetric_free(ctx, &buf);
}
