// pkb-expect: mismatch
// pkb-problem: 1
// Saving work where it might not be looked at: exact in the correctness trials, then in every timed
// call one element in 4096 is left at zero. A candidate cannot know which positions a timed call's
// samples will read (their key reaches the worker only after the call's fingerprint is committed),
// and the calls compared element by element are chosen in secret: both catch it.
#include <pkb/solution.h>

namespace {
int calls = 0;

template <typename T>
__global__ void zero_every(T* p, long long n, long long stride) {
  long long i = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) * stride;
  if (i < n) p[i] = T(0);
}
}  // namespace

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  long long n = pkb_numel(&in[0]);
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, n, pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm, ctx->stream));
  if (++calls > 2) {  // after the trials (--trials 2)
    long long hits = (n + 4095) / 4096;
    unsigned blocks = static_cast<unsigned>((hits + 255) / 256);
    // Element size decides the type; zero bits are zero in every dtype problem 1 uses.
    if (pkb_dtype_size(out[0].dtype) == 2)
      zero_every<<<blocks, 256, 0, ctx->stream>>>(static_cast<unsigned short*>(out[0].data), n, 4096);
    else
      zero_every<<<blocks, 256, 0, ctx->stream>>>(static_cast<unsigned*>(out[0].data), n, 4096);
    PKB_LAUNCH(ctx);
  }
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
