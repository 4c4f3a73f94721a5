// Baseline for problem 26 (MoE token-dispatch preprocessing). PKB's PyTorch, in order: the mask's
// sum over slots and tokens (the per-expert counts, fp32); a reshape and sum into input_splits and a
// .tolist(); all_gather_into_tensor of the counts; the slice of this rank's experts, its sum into
// output_splits and a .tolist(); the slice's column sums; copies of both to the CPU; the two lists
// back into int64 tensors. Here, on ctx->stream:
//   1. count_tokens: the per-expert counts (blocks of one expert's K M values, each block's sum added
//      to its expert's count with an fp32 atomic: the values are integers below 2^24, so every order
//      gives the same bits);
//   2. ncclAllGather of the E fp32 counts (PyTorch's all_gather_into_tensor);
//   3. split_counts: one small kernel for what PyTorch does in several (slices, sums, casts).
// Deviation kept on purpose: PKB returns CPU tensors and synchronizes the host twice (.tolist(), the
// non_blocking copies); pkb's outputs stay on the device, and nothing here waits for the host.
#include <pkb/solution.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16 * kThreads;  // mask elements per block
constexpr int kMaxWorld = 64;

/// Purpose: counts[e] += the sum of mask[e] over slots and tokens.
/// Approach: grid (chunks of kChunk elements, E); a strided per-thread sum, a warp shuffle tree,
/// one atomic per block. Requires counts zeroed first.
__global__ void __launch_bounds__(kThreads) count_tokens(const float* __restrict__ mask, int64_t per_expert,
                                                         float* __restrict__ counts) {
  const int e = blockIdx.y;
  const float* row = mask + e * per_expert;
  const int64_t begin = blockIdx.x * kChunk;
  const int64_t end = begin + kChunk < per_expert ? begin + kChunk : per_expert;
  float sum = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) sum += row[i];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  __shared__ float warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float block = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) block += warp_sums[w];
    atomicAdd(&counts[e], block);
  }
}

/// Purpose: the four outputs from gathered[i * E + e] = rank i's count for expert e.
/// Approach: one thread per rank i (and per local expert for the column sums); W L <= 64 values.
__global__ void split_counts(const float* __restrict__ gathered, int world, int rank, int experts, int local,
                             int64_t* __restrict__ input_splits, int64_t* __restrict__ output_splits,
                             float* __restrict__ per_local, float* __restrict__ sum_local) {
  const int i = threadIdx.x;
  if (i < world) {
    const float* mine = gathered + rank * experts;                // this rank's counts
    const float* theirs = gathered + i * experts + rank * local;  // rank i's counts for my experts
    float send = 0.0f, recv = 0.0f;
    for (int l = 0; l < local; ++l) {
      send += mine[i * local + l];  // my tokens for rank i's experts
      recv += theirs[l];
      per_local[i * local + l] = theirs[l];
    }
    input_splits[i] = static_cast<int64_t>(send);  // PKB: .tolist() of fp32, then torch.long
    output_splits[i] = static_cast<int64_t>(recv);
  }
  if (i < local) {
    float s = 0.0f;
    for (int j = 0; j < world; ++j) s += gathered[j * experts + rank * local + i];
    sum_local[i] = s;
  }
}

struct Scratch {
  float* counts = nullptr;    // [E]
  float* gathered = nullptr;  // [W * E]
  int experts = 0;
};

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* s = new Scratch;
  ctx->user = s;
  s->experts = static_cast<int>(ctx->param(ctx, "E", 8));
  if (ctx->world > kMaxWorld || s->experts % ctx->world != 0)
    PKB_FAIL_(ctx, "pkb_init", "the experts must divide evenly over at most 64 ranks");
  PKB_CUDA(ctx, cudaMalloc(&s->counts, s->experts * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&s->gathered, ctx->world * s->experts * sizeof(float)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* s = static_cast<Scratch*>(ctx->user);
  const pkb_tensor& mask = in[0];  // fp32 [E, K, M]
  const int E = s->experts, W = ctx->world, L = E / W;
  if (mask.dtype != PKB_FP32 || mask.ndim != 3 || mask.shape[0] != E)
    PKB_FAIL_(ctx, "pkb_run", "expert_mask must be fp32 [E, K, M]");
  const int64_t per_expert = mask.shape[1] * mask.shape[2];
  cudaStream_t st = ctx->stream;

  // 1. Per-expert counts.
  PKB_CUDA(ctx, cudaMemsetAsync(s->counts, 0, E * sizeof(float), st));
  int64_t chunks = (per_expert + kChunk - 1) / kChunk;
  if (chunks > 0) {
    count_tokens<<<dim3(static_cast<unsigned>(chunks), E), kThreads, 0, st>>>(static_cast<const float*>(mask.data),
                                                                             per_expert, s->counts);
    PKB_LAUNCH(ctx);
  }
  // 2. Every rank's counts.
  PKB_NCCL(ctx, ncclAllGather(s->counts, s->gathered, E, ncclFloat32, ctx->comm, st));
  // 3. Splits and this rank's experts' counts.
  split_counts<<<1, kMaxWorld, 0, st>>>(s->gathered, W, ctx->rank, E, L, static_cast<int64_t*>(out[0].data),
                                        static_cast<int64_t*>(out[1].data), static_cast<float*>(out[2].data),
                                        static_cast<float*>(out[3].data));
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* s = static_cast<Scratch*>(ctx->user);
  if (s) {
    cudaFree(s->counts);
    cudaFree(s->gathered);
    delete s;
  }
  ctx->user = nullptr;
  return 0;
}
