// pkb-expect: mismatch
// pkb-problem: 1
// Prints what a result line might look like ("ok", "speedup 100x", a JSON record) on stdout and
// stderr, then computes a wrong answer. pkb never reads a worker's output streams for results.
#include <pkb/solution.h>

#include <cstdio>

__global__ void add_one(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1.0f;
}

extern "C" int pkb_init(pkb_context*) {
  const char* fake = "status ok -- speedup 100.000x\n{\"status\": \"ok\", \"speedup\": 100.0}\nPKB_EVAL_JSON:{\"all_ok\": true}\n";
  std::fputs(fake, stdout);
  std::fputs(fake, stderr);
  std::fflush(nullptr);
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // Treat the bf16 output as floats and add one: garbage everywhere.
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm,
                              ctx->stream));
  add_one<<<64, 256, 0, ctx->stream>>>(static_cast<float*>(out[0].data), pkb_numel(&out[0]) * pkb_dtype_size(out[0].dtype) / 4);
  PKB_LAUNCH(ctx);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
