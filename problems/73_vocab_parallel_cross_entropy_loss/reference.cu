// Baseline for problem 73 (vocab-parallel cross-entropy loss, forward): PKB's sequence of ops, one
// plain kernel per PyTorch op and one ncclAllReduce per dist.all_reduce, all on ctx->stream:
//
//   1. row_max          logits_max = max(logits, dim=-1)                (exact)
//   2. ncclAllReduce    MAX over ranks                                   (exact)
//   3. subtract_max     logits -= logits_max, in place, rounded to D     (PKB's sub_ on its input)
//   4. pick_target      target logit where it falls in this rank's vocabulary range, else 0
//   5. ncclAllReduce    SUM over ranks (one rank holds each target: exact)
//   6. exp_row_sum      sum(exp(logits), dim=-1): exp rounded to D (torch.exp on a D tensor), summed
//                       in fp32 and rounded to D (torch's sum of a bf16/fp16 tensor)
//   7. ncclAllReduce    SUM over ranks, in D (NCCL rounds each hop to D)
//   8. loss             log(sum) rounded to D, minus the target logit, rounded to D
//
// Row kernels give each row one warp and load 16 bytes per lane when the rows allow it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pkb/solution.h>

#include <algorithm>

namespace {

template <typename T> __device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

// Elements of T in one 16-byte vector.
template <typename T> constexpr int kVec = 16 / sizeof(T);
template <typename T> struct alignas(16) Vec { T v[kVec<T>]; };

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Calls f(value as float) for every element of row `row` that this lane owns. `vec`: the row length
// is a multiple of kVec<T> (rows then start 16-byte aligned in a 256-byte aligned tensor).
template <typename T, typename F>
__device__ __forceinline__ void for_row(const T* x, long long row, int cols, bool vec, F f) {
  const T* p = x + row * cols;
  int lane = threadIdx.x & 31;
  if (vec) {
    const Vec<T>* pv = reinterpret_cast<const Vec<T>*>(p);
    for (int c = lane; c < cols / kVec<T>; c += 32) {
      Vec<T> v = pv[c];
#pragma unroll
      for (int j = 0; j < kVec<T>; ++j) f(to_f(v.v[j]));
    }
  } else {
    for (int c = lane; c < cols; c += 32) f(to_f(p[c]));
  }
}

// 1. Row max (one warp per row).
template <typename T>
__global__ void row_max(const T* x, T* mx, long long rows, int cols, bool vec) {
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  float m = -INFINITY;
  for_row(x, row, cols, vec, [&](float v) { m = fmaxf(m, v); });
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) mx[row] = from_f<T>(m);
}

// 3. In place: x -= max of its row, rounded to T.
template <typename T>
__global__ void subtract_max(T* x, const T* mx, long long n, int cols) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    x[i] = from_f<T>(to_f(x[i]) - to_f(mx[i / cols]));
}
// The same, 16 bytes per thread (cols a multiple of kVec<T>, so a vector never straddles rows).
template <typename T>
__global__ void subtract_max_vec(T* x, const T* mx, long long n_vec, int cols) {
  Vec<T>* xv = reinterpret_cast<Vec<T>*>(x);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    Vec<T> v = xv[i];
    float m = to_f(mx[i * kVec<T> / cols]);
#pragma unroll
    for (int j = 0; j < kVec<T>; ++j) v.v[j] = from_f<T>(to_f(v.v[j]) - m);
    xv[i] = v;
  }
}

// 4. The target's (shifted) logit if the target is in [vocab_start, vocab_start + cols), else 0.
template <typename T>
__global__ void pick_target(const T* x, const long long* target, T* pred, long long rows, int cols,
                            long long vocab_start) {
  long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  long long t = target[row] - vocab_start;
  pred[row] = (t >= 0 && t < cols) ? x[row * cols + t] : from_f<T>(0.0f);
}

// 6. sum(exp(x)) per row: every exp rounded to T, fp32 accumulation, the sum rounded to T.
template <typename T>
__global__ void exp_row_sum(const T* x, T* s, long long rows, int cols, bool vec) {
  long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  float acc = 0.0f;
  for_row(x, row, cols, vec, [&](float v) { acc += to_f(from_f<T>(expf(v))); });
  acc = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) s[row] = from_f<T>(acc);
}

// 8. loss = log(sum) - target logit, each op rounded to T.
template <typename T>
__global__ void loss_kernel(const T* s, const T* pred, T* loss, long long rows) {
  long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  T l = from_f<T>(logf(to_f(s[row])));
  loss[row] = from_f<T>(to_f(l) - to_f(pred[row]));
}

struct State {
  void* scratch = nullptr;  // [3][rows] of D: row max, target logit, sum of exp
  long long rows = 0;       // capacity of scratch, in rows
};

template <typename T>
int run_typed(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  State* st = static_cast<State*>(ctx->user);
  T* logits = static_cast<T*>(in[0].data);
  const long long* target = static_cast<const long long*>(in[1].data);
  T* loss = static_cast<T*>(out[0].data);
  int cols = static_cast<int>(in[0].shape[2]);
  long long rows = in[0].shape[0] * in[0].shape[1];
  if (rows > st->rows) {
    ctx->set_error(ctx, "more rows than the size variables B * T announced to pkb_init");
    return 1;
  }
  T* mx = static_cast<T*>(st->scratch);
  T* pred = mx + rows;
  T* sum = pred + rows;
  ncclDataType_t dt = pkb_nccl_dtype(ctx->dtype);
  cudaStream_t s = ctx->stream;
  bool vec = cols % kVec<T> == 0;
  unsigned warp_blocks = static_cast<unsigned>((rows * 32 + 255) / 256);
  unsigned row_blocks = static_cast<unsigned>((rows + 255) / 256);
  long long n = rows * cols;
  unsigned ew_blocks = static_cast<unsigned>(
      std::min<long long>((n / (vec ? kVec<T> : 1) + 255) / 256, 16LL * std::max(ctx->topo.sm_count, 1)));

  row_max<T><<<warp_blocks, 256, 0, s>>>(logits, mx, rows, cols, vec);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(mx, mx, rows, dt, ncclMax, ctx->comm, s));
  if (vec) subtract_max_vec<T><<<ew_blocks, 256, 0, s>>>(logits, mx, n / kVec<T>, cols);
  else subtract_max<T><<<ew_blocks, 256, 0, s>>>(logits, mx, n, cols);
  PKB_LAUNCH(ctx);
  pick_target<T><<<row_blocks, 256, 0, s>>>(logits, target, pred, rows, cols,
                                            static_cast<long long>(ctx->rank) * cols);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(pred, pred, rows, dt, ncclSum, ctx->comm, s));
  exp_row_sum<T><<<warp_blocks, 256, 0, s>>>(logits, sum, rows, cols, vec);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllReduce(sum, sum, rows, dt, ncclSum, ctx->comm, s));
  loss_kernel<T><<<row_blocks, 256, 0, s>>>(sum, pred, loss, rows);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  st->rows = ctx->param(ctx, "B", 0) * ctx->param(ctx, "T", 0);
  PKB_CUDA(ctx, cudaMalloc(&st->scratch, 3 * st->rows * pkb_dtype_size(ctx->dtype)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  switch (ctx->dtype) {
    case PKB_BF16: return run_typed<__nv_bfloat16>(ctx, in, out);
    case PKB_FP16: return run_typed<__half>(ctx, in, out);
    case PKB_FP32: return run_typed<float>(ctx, in, out);
    default: ctx->set_error(ctx, "unsupported dtype"); return 1;
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (st) {
    PKB_CUDA(ctx, cudaFree(st->scratch));
    delete st;
    ctx->user = nullptr;
  }
  return 0;
}
