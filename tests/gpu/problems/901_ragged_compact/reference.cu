// The ragged check problem's solution: block b copies row b of x to its place among the kept rows
// (the number of kept rows before it), block 0 writes the count; nothing is written past the count.
// gpu_test derives wrong and right variants by changing kVariant (see RaggedOutputs... there).
#include <pkb/solution.h>

constexpr int kVariant = 0;  // 0 reference, 1 tail_filled, 2 count_one_too_many, 3 row_skipped, 4 row_wrong

__global__ void compact(const float* x, float* kept, int* n_kept, int rows, int cols) {
  __shared__ int before, total;
  if (threadIdx.x == 0) {
    before = total = 0;
    for (int r = 0; r < rows; ++r) {
      bool keep = x[size_t(r) * cols] > 0.0f;
      before += keep && r < blockIdx.x;
      total += keep;
    }
  }
  __syncthreads();
  const int b = blockIdx.x;
  const bool keep = x[size_t(b) * cols] > 0.0f;
  const bool last = keep && before == total - 1;
  if (keep && !(kVariant == 3 && last))
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      kept[size_t(before) * cols + c] = x[size_t(b) * cols + c] + (kVariant == 4 && last && c == 0 ? 1.0f : 0.0f);
  if (kVariant == 1 && b >= total)  // rows past the count: anything, NaN included
    for (int c = threadIdx.x; c < cols; c += blockDim.x) kept[size_t(b) * cols + c] = __int_as_float(0x7fc00000 | b);
  if (b == 0 && threadIdx.x == 0) *n_kept = total + (kVariant == 2 && total < rows ? 1 : 0);
}

extern "C" int pkb_init(pkb_context*) { return 0; }
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  int rows = int(in[0].shape[0]), cols = int(in[0].shape[1]);
  compact<<<rows, 64, 0, ctx->stream>>>((const float*)in[0].data, (float*)out[0].data, (int*)out[1].data, rows, cols);
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
