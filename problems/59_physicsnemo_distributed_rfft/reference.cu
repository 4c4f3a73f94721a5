// Baseline for problem 59 (PhysicsNeMo DistributedRFFT2): the 2-D real FFT of a field split into
// column slabs, in the order PKB's PyTorch code runs it, with cuFFT for the transforms:
//   1. torch.fft.fft along H of the real slab [B, H, Wl]. PyTorch moves the transform dim last
//      (a copy into [B, Wl, H]), runs a batched R2C and fills the bins above H/2 from conjugate
//      symmetry, then scales by 1/sqrt(H) ("ortho"). Here: transpose_fields, one R2C plan over the
//      B Wl columns, and the fill and scale folded into the pack below;
//   2. split along H into W blocks of Hl rows, each made contiguous: pack_spectrum writes block j
//      (rows j Hl .. (j+1) Hl - 1 of every field, [B, Hl, Wl]) as the j-th send buffer;
//   3. dist.all_to_all of the list: grouped ncclSend / ncclRecv of block j with rank j;
//   4. torch.cat of the received blocks along W: gather_columns puts rank j's block at columns
//      j Wl .. (j+1) Wl - 1 of every row, giving this rank's row slab [B, Hl, Wd];
//   5. torch.fft.fft along W (n = Wd, "ortho"): one C2C plan over the B Hl contiguous rows;
//   6. keep bins 0 .. Wd/2 (PKB's _truncate + .contiguous()): keep_bins, with the 1/sqrt(Wd) scale.
// The output is complex64 as pkb stores it: interleaved fp32 (re, im), i.e. cufftComplex's layout.
// Buffers: three of B H Wl complex64 per rank, reused step to step (all work is ordered on ctx->stream).
#include <pkb/solution.h>

#include <cufft.h>
#include <math.h>
#include <stdint.h>

#define PKB_CUFFT(ctx, call)                                                       \
  do {                                                                             \
    cufftResult pkb_e_ = (call);                                                   \
    if (pkb_e_ != CUFFT_SUCCESS) PKB_FAIL_(ctx, #call, cufft_result_name(pkb_e_)); \
  } while (0)

namespace {

const char* cufft_result_name(cufftResult r) {
  switch (r) {
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED (out of device memory for the plan's work area)";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED (is libcufft from the same CUDA toolkit?)";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    default: return "cuFFT error";
  }
}

struct State {
  cufftHandle along_h = 0;  // R2C, length H, batch B Wl, contiguous
  cufftHandle along_w = 0;  // C2C forward, length Wd, batch B Hl, contiguous
  bool has_h = false, has_w = false;
  float2* a = nullptr;      // transposed input, then the send blocks
  float2* b = nullptr;      // the R2C half spectrum, then the gathered row slab
  float2* c = nullptr;      // the received blocks, then the row slab's full spectrum
  int64_t B = 0, H = 0, Wd = 0, Hl = 0, Wl = 0, K = 0;
};

constexpr int kTile = 32;   // transpose tile edge
constexpr int kRowsPerPass = 8;  // tile rows a 32 x 8 block moves per pass

// Purpose: step 1's layout change, x [B][H][Wl] -> xt [B][Wl][H], so that every column's H samples
// are contiguous for the batched R2C. Approach: 32 x 32 tiles through shared memory (coalesced
// reads and writes). Grid: (H / 32, Wl / 32, B) rounded up, block 32 x 8.
__global__ void transpose_fields(const float* __restrict__ x, float* __restrict__ xt, uint32_t H, uint32_t Wl) {
  __shared__ float tile[kTile][kTile + 1];
  const uint32_t h0 = blockIdx.x * kTile, w0 = blockIdx.y * kTile;
  const size_t field = (size_t)blockIdx.z * H * Wl;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    uint32_t h = h0 + i, w = w0 + threadIdx.x;
    if (h < H && w < Wl) tile[i][threadIdx.x] = x[field + (size_t)h * Wl + w];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    uint32_t w = w0 + i, h = h0 + threadIdx.x;
    if (h < H && w < Wl) xt[field + (size_t)w * H + h] = tile[threadIdx.x][i];
  }
}

// Purpose: steps 1-2 after the R2C: from the half spectrum F [B][Wl][H/2 + 1] build the full one
// (bin h > H/2 is conj(F[H - h]), as PyTorch's conjugate-symmetric fill), scale it by 1/sqrt(H) and
// lay it out as W send blocks [W][B][Hl][Wl] (row h of field b goes to block h / Hl). Approach: the
// same tiled transpose, over (column w, bin h). Grid: (H / 32, Wl / 32, B) rounded up, block 32 x 8.
__global__ void pack_spectrum(const float2* __restrict__ half, float2* __restrict__ send, uint32_t B, uint32_t H,
                              uint32_t Hl, uint32_t Wl, float scale) {
  __shared__ float2 tile[kTile][kTile + 1];
  const uint32_t h0 = blockIdx.x * kTile, w0 = blockIdx.y * kTile, b = blockIdx.z;
  const uint32_t kept = H / 2 + 1;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    uint32_t w = w0 + i, h = h0 + threadIdx.x;
    if (h < H && w < Wl) {
      const float2* column = half + ((size_t)b * Wl + w) * kept;
      float2 v = h < kept ? column[h] : column[H - h];
      if (h >= kept) v.y = -v.y;
      tile[i][threadIdx.x] = make_float2(v.x * scale, v.y * scale);
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    uint32_t h = h0 + i, w = w0 + threadIdx.x;
    if (h < H && w < Wl) {
      uint32_t j = h / Hl, hl = h % Hl;
      send[(((size_t)j * B + b) * Hl + hl) * Wl + w] = tile[threadIdx.x][i];
    }
  }
}

// Purpose: step 4, recv [W][B Hl][Wl] -> slab [B Hl][Wd]: block j of row r lands at columns
// j Wl .. (j+1) Wl - 1. Approach: one thread block per (row, source rank) segment, a contiguous copy.
// Grid: B Hl W blocks.
__global__ void gather_columns(const float2* __restrict__ recv, float2* __restrict__ slab, uint32_t rows,
                               uint32_t W, uint32_t Wl) {
  const uint32_t r = blockIdx.x / W, j = blockIdx.x % W;
  const float2* src = recv + ((size_t)j * rows + r) * Wl;
  float2* dst = slab + ((size_t)r * W + j) * Wl;
  for (uint32_t w = threadIdx.x; w < Wl; w += blockDim.x) dst[w] = src[w];
}

// Purpose: step 6, the first K bins of every row of the full spectrum [B Hl][Wd], scaled by
// 1/sqrt(Wd), as y [B Hl][K] of (re, im) pairs. Grid: one block per row.
__global__ void keep_bins(const float2* __restrict__ full, float2* __restrict__ y, uint32_t Wd, uint32_t K,
                          float scale) {
  const float2* src = full + (size_t)blockIdx.x * Wd;
  float2* dst = y + (size_t)blockIdx.x * K;
  for (uint32_t k = threadIdx.x; k < K; k += blockDim.x) dst[k] = make_float2(src[k].x * scale, src[k].y * scale);
}

// Threads for a kernel that strides one row of `len` elements: a warp multiple, at most 256.
unsigned row_threads(int64_t len) {
  int64_t t = (len + 31) / 32 * 32;
  return (unsigned)(t < 256 ? t : 256);
}

unsigned tiles(int64_t n) { return (unsigned)((n + kTile - 1) / kTile); }

int run_transforms(pkb_context* ctx, State* s, const float* x, float* y) {
  const float scale_h = (float)(1.0 / sqrt((double)s->H)), scale_w = (float)(1.0 / sqrt((double)s->Wd));
  const dim3 tile_block(kTile, kRowsPerPass);
  // 1. FFT along H: x -> a (transposed) -> b (half spectrum per column).
  transpose_fields<<<dim3(tiles(s->H), tiles(s->Wl), (unsigned)s->B), tile_block, 0, ctx->stream>>>(
      x, reinterpret_cast<float*>(s->a), (uint32_t)s->H, (uint32_t)s->Wl);
  PKB_LAUNCH(ctx);
  PKB_CUFFT(ctx, cufftExecR2C(s->along_h, reinterpret_cast<cufftReal*>(s->a), reinterpret_cast<cufftComplex*>(s->b)));
  // 2. Full spectrum, scaled, as W send blocks: b -> a.
  pack_spectrum<<<dim3(tiles(s->H), tiles(s->Wl), (unsigned)s->B), tile_block, 0, ctx->stream>>>(
      s->b, s->a, (uint32_t)s->B, (uint32_t)s->H, (uint32_t)s->Hl, (uint32_t)s->Wl, scale_h);
  PKB_LAUNCH(ctx);
  // 3. Block j to rank j, rank j's block into slot j: a -> c.
  const int W = ctx->world;
  const size_t block = (size_t)(s->B * s->Hl * s->Wl), floats = 2 * block;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(s->a + j * block, floats, ncclFloat32, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(s->c + j * block, floats, ncclFloat32, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 4. Row slab [B Hl][Wd]: c -> b.
  const uint32_t rows = (uint32_t)(s->B * s->Hl);
  gather_columns<<<rows * (unsigned)W, row_threads(s->Wl), 0, ctx->stream>>>(s->c, s->b, rows, (uint32_t)W,
                                                                               (uint32_t)s->Wl);
  PKB_LAUNCH(ctx);
  // 5. FFT along Wd: b -> c.
  PKB_CUFFT(ctx, cufftExecC2C(s->along_w, reinterpret_cast<cufftComplex*>(s->b), reinterpret_cast<cufftComplex*>(s->c),
                              CUFFT_FORWARD));
  // 6. Bins 0 .. Wd/2, scaled: c -> y.
  keep_bins<<<rows, row_threads(s->K), 0, ctx->stream>>>(s->c, reinterpret_cast<float2*>(y), (uint32_t)s->Wd,
                                                         (uint32_t)s->K, scale_w);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  s->B = ctx->param(ctx, "B", 0);
  s->H = ctx->param(ctx, "H", 0);
  s->Wd = ctx->param(ctx, "Wd", 0);
  s->Hl = ctx->param(ctx, "Hl", 0);
  s->Wl = ctx->param(ctx, "Wl", 0);
  s->K = ctx->param(ctx, "K", 0);
  const size_t bytes = (size_t)(s->B * s->H * s->Wl) * sizeof(float2);
  PKB_CUDA(ctx, cudaMalloc(&s->a, bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->b, bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->c, bytes));
  // Basic (contiguous) layouts: real batches H apart, their half spectra H/2 + 1 apart; rows Wd apart.
  int n_h = (int)s->H, n_w = (int)s->Wd;
  PKB_CUFFT(ctx, cufftPlanMany(&s->along_h, 1, &n_h, nullptr, 1, n_h, nullptr, 1, n_h / 2 + 1, CUFFT_R2C,
                               (int)(s->B * s->Wl)));
  s->has_h = true;
  PKB_CUFFT(ctx, cufftPlanMany(&s->along_w, 1, &n_w, nullptr, 1, n_w, nullptr, 1, n_w, CUFFT_C2C,
                               (int)(s->B * s->Hl)));
  s->has_w = true;
  PKB_CUFFT(ctx, cufftSetStream(s->along_h, ctx->stream));
  PKB_CUFFT(ctx, cufftSetStream(s->along_w, ctx->stream));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // fp32 [B, H, Wl]
  pkb_tensor& y = out[0];       // fp32 [B, Hl, K, 2]
  if (x.ndim != 3 || x.shape[0] != s->B || x.shape[1] != s->H || x.shape[2] != s->Wl || y.ndim != 4 ||
      y.shape[1] != s->Hl || y.shape[2] != s->K || y.shape[3] != 2) {
    ctx->set_error(ctx, "x or y differs from the shapes of the spec's B, H, Wl, Hl, K (the plans were made for those)");
    return 1;
  }
  return run_transforms(ctx, s, static_cast<const float*>(x.data), static_cast<float*>(y.data));
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  if (s->has_h) PKB_CUFFT(ctx, cufftDestroy(s->along_h));
  if (s->has_w) PKB_CUFFT(ctx, cufftDestroy(s->along_w));
  PKB_CUDA(ctx, cudaFree(s->a));
  PKB_CUDA(ctx, cudaFree(s->b));
  PKB_CUDA(ctx, cudaFree(s->c));
  delete s;
  ctx->user = nullptr;
  return 0;
}
