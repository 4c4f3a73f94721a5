// Baseline for problem 11 (all-gather of A^T + GEMM). PKB transposes its shard A_local [M, K/W] into a
// contiguous [K/W, M] (A_local.transpose(0, 1).contiguous()), gathers the W transposed shards into
// one [W, K/W, M] = [K, M] buffer, A^T (dist.all_gather_into_tensor), multiplies C^T = B^T A^T
// (torch.matmul of the transposed view of B with A^T) and returns the transposed view of C^T.
// The same steps here:
//   1. transpose_tiles: A_local [M, K/W] -> scratch At_local [K/W, M] (PyTorch's .contiguous() copy);
//   2. ncclAllGather of At_local into At [K, M] (shard s lands in rows [s K/W, (s+1) K/W));
//   3. one cuBLAS GEMM, D in and out, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32 for fp32, as
//      PyTorch's default). PKB's result is a non-contiguous [M, N] view; pkb's output is C stored
//      row-major, so the GEMM writes C itself (the same product, laid out as pkb's output).
// Scratch (At_local and At, M K/W e and M K e bytes) is allocated in pkb_init.
#include <pkb/solution.h>

#include <cstdint>

namespace {

constexpr int kTile = 32;  // transpose tile edge
constexpr int kRowsPerPass = 8;  // the block is kTile x kRowsPerPass threads

struct State {
  void* at_local = nullptr;  // [K/W, M]
  void* at = nullptr;        // [K, M]
  size_t local_bytes = 0, bytes = 0;
};

cudaDataType_t cuda_type(pkb_dtype d) {
  switch (d) {
    case PKB_BF16: return CUDA_R_16BF;
    case PKB_FP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// dst[c, r] = src[r, c] for src [rows, cols], through a shared-memory tile so that both the loads and
// the stores are coalesced. U is the element's bit pattern (uint16_t or uint32_t): a pure move.
template <typename U>
__global__ void transpose_tiles(const U* __restrict__ src, U* __restrict__ dst, int64_t rows, int64_t cols) {
  __shared__ U tile[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  const int64_t r0 = (int64_t)blockIdx.y * kTile, c0 = (int64_t)blockIdx.x * kTile;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
  }
}

template <typename U>
void launch_transpose(const void* src, void* dst, int64_t rows, int64_t cols, cudaStream_t s) {
  dim3 grid((unsigned)((cols + kTile - 1) / kTile), (unsigned)((rows + kTile - 1) / kTile));
  dim3 block(kTile, kRowsPerPass);
  transpose_tiles<U><<<grid, block, 0, s>>>(static_cast<const U*>(src), static_cast<U*>(dst), rows, cols);
}

// Row-major C[M, N] = A B from At [K, M] (row-major, i.e. column-major A with leading dimension M) and
// row-major B [K, N] (column-major B^T): column-major C^T (N x M) = B^T (N x K, op N) times A^T (op T
// of the column-major M x K matrix A).
int gemm(pkb_context* ctx, const void* At, const void* B, void* C, int64_t M, int64_t N, int64_t K, pkb_dtype d) {
  const float one = 1.0f, zero = 0.0f;
  cudaDataType_t t = cuda_type(d);
  PKB_CUBLAS(ctx, cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)N, (int)M, (int)K, &one, B, t, (int)N, At,
                               t, (int)M, &zero, C, t, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  auto* st = new State;
  ctx->user = st;
  const size_t M = (size_t)ctx->param(ctx, "M", 0), K = (size_t)ctx->param(ctx, "K", 0);
  const size_t e = pkb_dtype_size(ctx->dtype);
  st->bytes = M * K * e;
  st->local_bytes = st->bytes / (size_t)ctx->world;
  PKB_CUDA(ctx, cudaMalloc(&st->at_local, st->local_bytes));
  PKB_CUDA(ctx, cudaMalloc(&st->at, st->bytes));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  auto* st = static_cast<State*>(ctx->user);
  const pkb_tensor& a = in[0];  // [M, K/W]
  const pkb_tensor& b = in[1];  // [K, N]
  const int64_t M = a.shape[0], Kl = a.shape[1], K = b.shape[0], N = b.shape[1];
  const size_t e = pkb_dtype_size(a.dtype);
  if ((size_t)(M * K) * e > st->bytes || (size_t)(M * Kl) * e > st->local_bytes)
    PKB_FAIL_(ctx, "pkb_run", "A is larger than the scratch pkb_init sized from M and K");
  if ((Kl + kTile - 1) / kTile >= (1ll << 31) || (M + kTile - 1) / kTile >= 65536)
    PKB_FAIL_(ctx, "pkb_run", "the shard is too large for the transpose grid");

  if (e == 2) launch_transpose<uint16_t>(a.data, st->at_local, M, Kl, ctx->stream);
  else launch_transpose<uint32_t>(a.data, st->at_local, M, Kl, ctx->stream);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(st->at_local, st->at, (size_t)(Kl * M), pkb_nccl_dtype(a.dtype), ctx->comm, ctx->stream));
  return gemm(ctx, st->at, b.data, out[0].data, M, N, K, a.dtype);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  auto* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  PKB_CUDA(ctx, cudaFree(st->at_local));
  PKB_CUDA(ctx, cudaFree(st->at));
  delete st;
  ctx->user = nullptr;
  return 0;
}
