// Baseline for problem 60 (PhysicsNeMo DistributedIRFFT2): the inverse 2-D real FFT of a half
// spectrum split into row slabs, in the order PKB's PyTorch code runs it, with cuFFT for the
// transforms and NCCL for PKB's two collectives:
//   1. F.pad of the last dim from K to Wd and the conjugate fill of columns K .. Wd-1 from the same
//      row's columns Wd-K .. 1 (PKB's _conj_pad_2d, first half): conj_pad, written straight into this
//      rank's slot of the all-gather buffer;
//   2. dist.all_gather of the padded slabs (PKB gathers all Wd columns of every row, although a rank
//      only needs the mirrored rows' upper columns): one in-place ncclAllGather;
//   3. the flip of rows 1 .. H-1 over columns K .. Wd-1 and the scatter back to the own rows:
//      mirror_rows picks, for each own row h, row (H - h) mod H's values in those columns;
//   4. torch.fft.ifft along Wd (n = Wd, "ortho"): one C2C inverse plan over the B C Hl rows;
//   5. split Wd into W blocks, each made contiguous: pack_blocks writes block j (columns
//      j Wl .. (j+1) Wl - 1 of every row, [B C][Hl][Wl]) as the j-th send buffer, with the 1/sqrt(Wd);
//   6. dist.all_to_all of the list: grouped ncclSend / ncclRecv of block j with rank j;
//   7. torch.cat of the received blocks along H, then torch.fft.ifft along H: PyTorch copies the
//      signal dim last ([B C][Wl][H]) for cuFFT; gather_columns does the cat and that transpose in
//      one pass, then one C2C inverse plan over the B C Wl columns;
//   8. torch.real(...).contiguous() with the 1/sqrt(H): real_part transposes back to [B C][H][Wl].
// PyTorch applies each "ortho" scale as a separate multiply after its transform; here the scales are
// folded into the next pass (the same one fp32 multiply per element). Complex64 is interleaved fp32
// (re, im), cufftComplex's layout. Buffers: the all-gather buffer (W padded slabs) and three of one
// slab (B C Hl Wd complex64) per rank, reused step to step (all work is ordered on ctx->stream).
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
  cufftHandle along_w = 0;  // C2C, length Wd, batch B C Hl, contiguous
  cufftHandle along_h = 0;  // C2C, length H, batch B C Wl, contiguous
  bool has_w = false, has_h = false;
  float2* gathered = nullptr;  // [W][B C][Hl][Wd]: every rank's padded slab (the all-gather)
  float2* a = nullptr;         // own padded rows, their Wd transform; later the columns [B C][Wl][H]
  float2* b = nullptr;         // the W send blocks [W][B C][Hl][Wl]
  float2* c = nullptr;         // the W received blocks [W][B C][Hl][Wl] (block j: rows j Hl ..)
  int64_t BC = 0, H = 0, Wd = 0, Hl = 0, Wl = 0, K = 0;
};

constexpr int kTile = 32;        // transpose tile edge
constexpr int kRowsPerPass = 8;  // tile rows a 32 x 8 block moves per pass
constexpr unsigned kThreads = 256;

// Purpose: step 1, x [B C Hl][K] -> padded [B C Hl][Wd]: column c < K is x's, column c >= K is
// conj(x[same row][Wd - c]). Approach: one thread per padded element, grid-stride.
__global__ void conj_pad(const float2* __restrict__ x, float2* __restrict__ padded, size_t n, uint32_t Wd,
                         uint32_t K) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const size_t row = i / Wd;
    const uint32_t c = (uint32_t)(i % Wd);
    float2 v = x[row * K + (c < K ? c : Wd - c)];
    if (c >= K) v.y = -v.y;
    padded[i] = v;
  }
}

// Purpose: step 3, the own rows of the Hermitian-padded spectrum from the gathered slabs: row h keeps
// its columns c < K; columns c >= K come from row (H - h) mod H (PKB's flip of rows 1 .. H-1; row 0
// keeps its own). gathered [W][B C][Hl][Wd] holds global row g of field f at (g / Hl, f, g % Hl).
// Approach: one thread per element of the own slab [B C][Hl][Wd], grid-stride.
__global__ void mirror_rows(const float2* __restrict__ gathered, float2* __restrict__ slab, size_t n, uint32_t BC,
                            uint32_t H, uint32_t Hl, uint32_t Wd, uint32_t K, uint32_t rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t c = (uint32_t)(i % Wd);
    const size_t row = i / Wd;  // f Hl + hl
    const uint32_t f = (uint32_t)(row / Hl), h = rank * Hl + (uint32_t)(row % Hl);
    const uint32_t g = c < K ? h : (H - h) % H;
    slab[i] = gathered[(((size_t)(g / Hl) * BC + f) * Hl + g % Hl) * Wd + c];
  }
}

// Purpose: step 5, the Wd-transformed rows [B C Hl][Wd] as W send blocks [W][B C Hl][Wl] (block j =
// columns j Wl .. (j+1) Wl - 1), scaled by 1/sqrt(Wd). Approach: one thread per element, grid-stride.
__global__ void pack_blocks(const float2* __restrict__ rows, float2* __restrict__ send, size_t n, uint32_t Wd,
                            uint32_t Wl, size_t block, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const size_t row = i / Wd;
    const uint32_t c = (uint32_t)(i % Wd), j = c / Wl;
    const float2 v = rows[i];
    send[j * block + row * Wl + c % Wl] = make_float2(v.x * scale, v.y * scale);
  }
}

// Purpose: step 7's cat along H and PyTorch's copy of H last: recv [W][B C][Hl][Wl] (block j holds
// rows j Hl .. (j+1) Hl - 1) -> cols [B C][Wl][H]. Approach: 32 x 32 tiles of (row h, column w)
// through shared memory. Grid: (H / 32, Wl / 32, B C) rounded up, block 32 x 8.
__global__ void gather_columns(const float2* __restrict__ recv, float2* __restrict__ cols, uint32_t BC, uint32_t H,
                               uint32_t Hl, uint32_t Wl) {
  __shared__ float2 tile[kTile][kTile + 1];
  const uint32_t h0 = blockIdx.x * kTile, w0 = blockIdx.y * kTile, f = blockIdx.z;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t h = h0 + i, w = w0 + threadIdx.x;
    if (h < H && w < Wl) tile[i][threadIdx.x] = recv[(((size_t)(h / Hl) * BC + f) * Hl + h % Hl) * Wl + w];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t w = w0 + i, h = h0 + threadIdx.x;
    if (h < H && w < Wl) cols[((size_t)f * Wl + w) * H + h] = tile[threadIdx.x][i];
  }
}

// Purpose: step 8, y [B C][H][Wl] = Re(cols [B C][Wl][H]) / sqrt(H). Approach: the same tiled
// transpose, over (column w, row h), keeping only the real parts. Grid: (H / 32, Wl / 32, B C)
// rounded up, block 32 x 8.
__global__ void real_part(const float2* __restrict__ cols, float* __restrict__ y, uint32_t H, uint32_t Wl,
                          float scale) {
  __shared__ float tile[kTile][kTile + 1];
  const uint32_t h0 = blockIdx.x * kTile, w0 = blockIdx.y * kTile, f = blockIdx.z;
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t w = w0 + i, h = h0 + threadIdx.x;
    if (h < H && w < Wl) tile[i][threadIdx.x] = cols[((size_t)f * Wl + w) * H + h].x * scale;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const uint32_t h = h0 + i, w = w0 + threadIdx.x;
    if (h < H && w < Wl) y[((size_t)f * H + h) * Wl + w] = tile[threadIdx.x][i];
  }
}

// Blocks for a grid-stride kernel over n elements (the loop covers any excess).
unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535 * 16 ? b : 65535 * 16);
}

unsigned tiles(int64_t n) { return (unsigned)((n + kTile - 1) / kTile); }

int run_transforms(pkb_context* ctx, State* s, const float2* x, float* y) {
  const int W = ctx->world, rank = ctx->rank;
  const size_t slab = (size_t)(s->BC * s->Hl * s->Wd), block = (size_t)(s->BC * s->Hl * s->Wl);
  const float scale_w = (float)(1.0 / sqrt((double)s->Wd)), scale_h = (float)(1.0 / sqrt((double)s->H));
  // 1-2. Pad into this rank's slot, then gather every rank's padded slab in place.
  float2* own_slot = s->gathered + (size_t)rank * slab;
  conj_pad<<<blocks_for(slab), kThreads, 0, ctx->stream>>>(x, own_slot, slab, (uint32_t)s->Wd, (uint32_t)s->K);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(own_slot, s->gathered, 2 * slab, ncclFloat32, ctx->comm, ctx->stream));
  // 3. Own rows of the full spectrum: gathered -> a.
  mirror_rows<<<blocks_for(slab), kThreads, 0, ctx->stream>>>(s->gathered, s->a, slab, (uint32_t)s->BC,
                                                               (uint32_t)s->H, (uint32_t)s->Hl, (uint32_t)s->Wd,
                                                               (uint32_t)s->K, (uint32_t)rank);
  PKB_LAUNCH(ctx);
  // 4. Inverse FFT along Wd, in place in a.
  PKB_CUFFT(ctx, cufftExecC2C(s->along_w, reinterpret_cast<cufftComplex*>(s->a), reinterpret_cast<cufftComplex*>(s->a),
                              CUFFT_INVERSE));
  // 5. Scaled send blocks: a -> b.
  pack_blocks<<<blocks_for(slab), kThreads, 0, ctx->stream>>>(s->a, s->b, slab, (uint32_t)s->Wd, (uint32_t)s->Wl,
                                                              block, scale_w);
  PKB_LAUNCH(ctx);
  // 6. Block j to rank j, rank j's block into slot j: b -> c.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(s->b + j * block, 2 * block, ncclFloat32, j, ctx->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(s->c + j * block, 2 * block, ncclFloat32, j, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  // 7. Columns [B C][Wl][H]: c -> a, then the inverse FFT along H in place.
  const dim3 tile_grid(tiles(s->H), tiles(s->Wl), (unsigned)s->BC), tile_block(kTile, kRowsPerPass);
  gather_columns<<<tile_grid, tile_block, 0, ctx->stream>>>(s->c, s->a, (uint32_t)s->BC, (uint32_t)s->H,
                                                            (uint32_t)s->Hl, (uint32_t)s->Wl);
  PKB_LAUNCH(ctx);
  PKB_CUFFT(ctx, cufftExecC2C(s->along_h, reinterpret_cast<cufftComplex*>(s->a), reinterpret_cast<cufftComplex*>(s->a),
                              CUFFT_INVERSE));
  // 8. Real part, scaled, back to [B C][H][Wl]: a -> y.
  real_part<<<tile_grid, tile_block, 0, ctx->stream>>>(s->a, y, (uint32_t)s->H, (uint32_t)s->Wl, scale_h);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  s->BC = ctx->param(ctx, "B", 0) * ctx->param(ctx, "C", 0);
  s->H = ctx->param(ctx, "H", 0);
  s->Wd = ctx->param(ctx, "Wd", 0);
  s->Hl = ctx->param(ctx, "Hl", 0);
  s->Wl = ctx->param(ctx, "Wl", 0);
  s->K = ctx->param(ctx, "K", 0);
  const size_t slab_bytes = (size_t)(s->BC * s->Hl * s->Wd) * sizeof(float2);
  PKB_CUDA(ctx, cudaMalloc(&s->gathered, (size_t)ctx->world * slab_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->a, slab_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->b, slab_bytes));
  PKB_CUDA(ctx, cudaMalloc(&s->c, slab_bytes));
  // Basic (contiguous) layouts: rows Wd apart, columns (after the transpose) H apart.
  int n_w = (int)s->Wd, n_h = (int)s->H;
  PKB_CUFFT(ctx, cufftPlanMany(&s->along_w, 1, &n_w, nullptr, 1, n_w, nullptr, 1, n_w, CUFFT_C2C,
                               (int)(s->BC * s->Hl)));
  s->has_w = true;
  PKB_CUFFT(ctx, cufftPlanMany(&s->along_h, 1, &n_h, nullptr, 1, n_h, nullptr, 1, n_h, CUFFT_C2C,
                               (int)(s->BC * s->Wl)));
  s->has_h = true;
  PKB_CUFFT(ctx, cufftSetStream(s->along_w, ctx->stream));
  PKB_CUFFT(ctx, cufftSetStream(s->along_h, ctx->stream));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const pkb_tensor& x = in[0];  // fp32 [B, C, Hl, K, 2]
  pkb_tensor& y = out[0];       // fp32 [B, C, H, Wl]
  if (x.ndim != 5 || x.shape[0] * x.shape[1] != s->BC || x.shape[2] != s->Hl || x.shape[3] != s->K ||
      x.shape[4] != 2 || y.ndim != 4 || y.shape[2] != s->H || y.shape[3] != s->Wl) {
    ctx->set_error(ctx, "x or y differs from the shapes of the spec's B, C, Hl, K, H, Wl (the plans were made for those)");
    return 1;
  }
  return run_transforms(ctx, s, static_cast<const float2*>(x.data), static_cast<float*>(y.data));
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  if (s->has_w) PKB_CUFFT(ctx, cufftDestroy(s->along_w));
  if (s->has_h) PKB_CUFFT(ctx, cufftDestroy(s->along_h));
  PKB_CUDA(ctx, cudaFree(s->gathered));
  PKB_CUDA(ctx, cudaFree(s->a));
  PKB_CUDA(ctx, cudaFree(s->b));
  PKB_CUDA(ctx, cudaFree(s->c));
  delete s;
  ctx->user = nullptr;
  return 0;
}
