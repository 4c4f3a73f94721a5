// pkb-expect: mismatch
// pkb-problem: 1
// Specialised to the spec's input distribution: problem 1 draws its inputs on the grid k/16 with
// |k| <= 32, so every value fits in an int8 code (16 x), and a sum of W codes is exact. This
// candidate all-gathers int8 codes instead of reducing bf16 (half the bytes) and sums the codes:
// bit-exact on every grid input, wrong on real data. pkb's held-out calls (the odd trials and every
// timed call) draw the inputs off the grid, at mixed magnitudes, and compare under a norm-wise bound
// that rounding noise meets and 4-bit fixed point does not.
#include <pkb/solution.h>

#include <cuda_bf16.h>

namespace {
signed char* codes = nullptr;  // [world][n]: every rank's codes
long long capacity = 0;

__global__ void encode(const __nv_bfloat16* x, signed char* c, long long n) {
  long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = rintf(__bfloat162float(x[i]) * 16.0f);
  c[i] = static_cast<signed char>(fminf(fmaxf(v, -127.0f), 127.0f));
}

__global__ void decode_sum(const signed char* c, __nv_bfloat16* y, long long n, int world) {
  long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  int s = 0;
  for (int r = 0; r < world; ++r) s += c[r * n + i];
  y[i] = __float2bfloat16(static_cast<float>(s) * 0.0625f);
}
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (in[0].dtype != PKB_BF16) {
    ctx->set_error(ctx, "this case is written for bf16");
    return 1;
  }
  long long n = pkb_numel(&in[0]);
  if (n * ctx->world > capacity) {
    if (codes) cudaFree(codes);
    capacity = n * ctx->world;
    PKB_CUDA(ctx, cudaMalloc(&codes, static_cast<size_t>(capacity)));
  }
  unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  signed char* mine = codes + static_cast<long long>(ctx->rank) * n;
  encode<<<blocks, 256, 0, ctx->stream>>>(static_cast<const __nv_bfloat16*>(in[0].data), mine, n);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(mine, codes, static_cast<size_t>(n), ncclInt8, ctx->comm, ctx->stream));
  decode_sum<<<blocks, 256, 0, ctx->stream>>>(codes, static_cast<__nv_bfloat16*>(out[0].data), n, ctx->world);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) {
  if (codes) cudaFree(codes);
  return 0;
}
