// Baseline for problem 81 (SAM 3 cross-GPU IoU suppression). PKB's solution(), as PyTorch runs it:
//   1. the local masks and scores cast to fp32 (.float());
//   2. two all-gathers of uneven lists (masks, then scores) and torch.cat: ProcessGroupNCCL gathers
//      tensors of unequal sizes as a coalesced group of ncclBroadcast calls, one per root rank j
//      with rank j's objects. Here each rank casts its objects straight into their slot of the
//      output (rows P_j .. P_j + c_j - 1, P_j = the objects of the ranks before j) and the
//      broadcasts run in place in the output, which is then torch.cat's result with no copy;
//   3. binary = masks_global > 0, as fp32 0/1, and the areas (row sums; one kernel here, exact:
//      integers below 2^24 in any order);
//   4. intersections = binary @ binary^T (one cuBLAS fp32 GEMM, no TF32, as torch.matmul's default:
//      0/1 products summed exactly), union = (a_i + a_j) - I_ij clamped to >= 1, iou = I / union;
//   5. overlaps = triu(iou >= 0.7, 1); PKB's two masked comparisons of last_occluded and the two
//      any() reductions (reverse = False): one thread per object here;
//   6. masks_global[to_suppress] = -10 (PKB's _NO_OBJ_LOGIT).
// PKB's num_obj_per_gpu (a host list) is c_j = mult (1 + ((j + shift) % 3)), from the parameters;
// iou_threshold = 0.7 and reverse = False are PKB's arguments, fixed here.
#include <pkb/solution.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

namespace {

constexpr float kIouThreshold = 0.7f;  // PKB: iou_threshold = 0.7 (compared in fp32)
constexpr float kNoObjLogit = -10.0f;  // PKB: _NO_OBJ_LOGIT
constexpr int kThreads = 256;
constexpr int kChunk = 8 * kThreads;   // mask elements per block
constexpr int kMaxObjects = 1024;

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

/// dst[i] = float(src[i]) (PKB's .float()).
template <typename T>
__global__ void cast_to_fp32(const T* __restrict__ src, float* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = to_float(src[i]);
}

/// Purpose: binary[o][p] = (masks[o][p] > 0) as 0/1 and area[o] += the chunk's count.
/// Approach: grid (chunks of kChunk pixels, objects); a warp-shuffle block sum, one atomic per
/// block (integer counts below 2^24: exact in any order). Requires area zeroed.
__global__ void __launch_bounds__(kThreads) binarize(const float* __restrict__ masks, int64_t pixels,
                                                     float* __restrict__ binary, float* __restrict__ area) {
  const int64_t o = blockIdx.y;
  const int64_t begin = blockIdx.x * (int64_t)kChunk;
  const int64_t end = begin + kChunk < pixels ? begin + kChunk : pixels;
  float count = 0.0f;
  for (int64_t p = begin + threadIdx.x; p < end; p += kThreads) {
    const float b = masks[o * pixels + p] > 0.0f ? 1.0f : 0.0f;
    binary[o * pixels + p] = b;
    count += b;
  }
  for (int off = 16; off > 0; off /= 2) count += __shfl_down_sync(0xffffffffu, count, off);
  __shared__ float warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w];
    atomicAdd(&area[o], s);
  }
}

/// Whether objects i < j overlap: fp32(I / max((a_i + a_j) - I, 1)) >= fp32(0.7), as PKB's _mask_iou.
__device__ bool overlaps(const float* inter, const float* area, int n, int i, int j) {
  const float in = inter[i * n + j];
  const float uni = fmaxf(__fsub_rn(__fadd_rn(area[i], area[j]), in), 1.0f);
  return __fdiv_rn(in, uni) >= kIouThreshold;
}

/// Purpose: to_suppress[k] (PKB's _suppression_mask, reverse = False): k overlaps some m with
/// last[k] > last[m] > -1 (row k of suppress_i for m > k, column k of suppress_j for m < k).
/// One thread per object; n <= kMaxObjects.
__global__ void suppression(const float* __restrict__ inter, const float* __restrict__ area,
                            const int64_t* __restrict__ last, int n, bool* __restrict__ to_suppress) {
  const int k = threadIdx.x;
  if (k >= n) return;
  bool s = false;
  for (int m = 0; m < n && !s; ++m) {
    if (m == k || !(last[k] > last[m] && last[m] > -1)) continue;
    s = m > k ? overlaps(inter, area, n, k, m) : overlaps(inter, area, n, m, k);
  }
  to_suppress[k] = s;
}

/// masks[o][:] = -10 for every suppressed object o; grid (chunks, objects).
__global__ void clear_suppressed(float* __restrict__ masks, int64_t pixels, const bool* __restrict__ to_suppress) {
  const int64_t o = blockIdx.y;
  if (!to_suppress[o]) return;
  const int64_t begin = blockIdx.x * (int64_t)kChunk;
  const int64_t end = begin + kChunk < pixels ? begin + kChunk : pixels;
  for (int64_t p = begin + threadIdx.x; p < end; p += kThreads) masks[o * pixels + p] = kNoObjLogit;
}

struct State {
  std::vector<int64_t> counts, first;  // objects of each rank, and the first object's global row
  int64_t objects = 0, pixels = 0;
  float* binary = nullptr;             // [T, H Wd]
  float* area = nullptr;               // [T]
  float* inter = nullptr;              // [T, T]
};

unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/// The uneven all-gather in place in `global` (rows of `row` floats): one broadcast per root.
int gather_rows(pkb_context* ctx, const State& st, float* global, int64_t row) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < ctx->world; ++j) {
    if (st.counts[j] == 0) continue;
    float* slot = global + st.first[j] * row;
    PKB_NCCL(ctx, ncclBroadcast(slot, slot, (size_t)(st.counts[j] * row), ncclFloat32, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

template <typename T>
int run(pkb_context* ctx, State& st, const pkb_tensor* in, pkb_tensor* out) {
  const int rank = ctx->rank;
  const int64_t n = st.objects, px = st.pixels, mine = st.counts[rank];
  if (in[0].shape[0] != mine || in[1].shape[0] != mine || in[2].shape[0] != n || out[0].shape[0] != n ||
      in[0].shape[1] * in[0].shape[2] != px)
    PKB_FAIL_(ctx, "pkb_run", "the tensors are not the shapes pkb_init derived from mult, shift, H and Wd");
  cudaStream_t s = ctx->stream;
  float* masks = static_cast<float*>(out[0].data);
  float* scores = static_cast<float*>(out[1].data);
  bool* to_suppress = static_cast<bool*>(out[2].data);
  // 1, 2. Cast into this rank's slot; gather every rank's masks, then scores.
  cast_to_fp32<T><<<grid_for(mine * px), kThreads, 0, s>>>(static_cast<const T*>(in[0].data), masks + st.first[rank] * px,
                                                          mine * px);
  PKB_LAUNCH(ctx);
  cast_to_fp32<T><<<1, kThreads, 0, s>>>(static_cast<const T*>(in[1].data), scores + st.first[rank], mine);
  PKB_LAUNCH(ctx);
  if (gather_rows(ctx, st, masks, px) || gather_rows(ctx, st, scores, 1)) return 1;
  // 3. Binary masks and areas.
  const dim3 grid((unsigned)((px + kChunk - 1) / kChunk), (unsigned)n);
  PKB_CUDA(ctx, cudaMemsetAsync(st.area, 0, n * sizeof(float), s));
  binarize<<<grid, kThreads, 0, s>>>(masks, px, st.binary, st.area);
  PKB_LAUNCH(ctx);
  // 4. Intersections: inter = B B^T for the row-major B [n, px], i.e. the column-major X^T X with
  // X = B viewed as [px, n] (symmetric, so either layout of the result is the same).
  const float one = 1.0f, zero = 0.0f;
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)n, (int)px, &one, st.binary,
                               CUDA_R_32F, (int)px, st.binary, CUDA_R_32F, (int)px, &zero, st.inter, CUDA_R_32F, (int)n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // 5. Which objects are suppressed, 6. their masks cleared.
  suppression<<<1, kMaxObjects, 0, s>>>(st.inter, st.area, static_cast<const int64_t*>(in[2].data), (int)n, to_suppress);
  PKB_LAUNCH(ctx);
  clear_suppressed<<<grid, kThreads, 0, s>>>(masks, px, to_suppress);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  const int64_t mult = ctx->param(ctx, "mult", 1), shift = ctx->param(ctx, "shift", 0);
  st->pixels = ctx->param(ctx, "H", 0) * ctx->param(ctx, "Wd", 0);
  for (int j = 0; j < ctx->world; ++j) {
    st->first.push_back(st->objects);
    st->counts.push_back(mult * (1 + (j + shift) % 3));  // PKB's num_obj_per_gpu
    st->objects += st->counts.back();
  }
  if (st->objects != ctx->param(ctx, "T", -1) || st->objects > kMaxObjects || st->pixels <= 0 ||
      st->pixels >= (int64_t{1} << 24))
    PKB_FAIL_(ctx, "pkb_init", "need T = the sum of the counts, T <= 1024 and 0 < H Wd < 2^24");
  PKB_CUDA(ctx, cudaMalloc(&st->binary, (size_t)(st->objects * st->pixels) * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->area, (size_t)st->objects * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->inter, (size_t)(st->objects * st->objects) * sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  // in: low_res_masks_local D [c, H, Wd], obj_scores_local D [c], last_occluded int64 [T];
  // out: masks_global fp32 [T, H, Wd], scores_global fp32 [T], to_suppress bool [T].
  State& st = *static_cast<State*>(ctx->user);
  switch (ctx->dtype) {
    case PKB_BF16: return run<__nv_bfloat16>(ctx, st, in, out);
    case PKB_FP16: return run<__half>(ctx, st, in, out);
    case PKB_FP32: return run<float>(ctx, st, in, out);
    default: PKB_FAIL_(ctx, "pkb_run", "D must be bf16, fp16 or fp32");
  }
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->binary));
  PKB_CUDA(ctx, cudaFree(st->area));
  PKB_CUDA(ctx, cudaFree(st->inter));
  delete st;
  ctx->user = nullptr;
  return 0;
}
