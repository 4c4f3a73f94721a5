// Baseline for problem 62 (torch-harmonics DistributedDiscreteContinuousConvS2), PKB's steps in
// PKB's order, fp32 throughout, with NCCL for its three collectives and cuBLAS for the einsum:
//   1. torch.split of x along channels + .contiguous(): pack_channel_slabs writes the A send blocks
//      [A][B][Cl][Hl][Ll] (block j = channels j Cl ..);
//   2. dist.all_to_all in the azimuth group: grouped ncclSend / ncclRecv of block j with group rank j
//      (skipped at A = 1, where x already has that layout);
//   3. torch.cat along longitude and _disco_s2_contraction_torch (L bmm's of the sparse psi against
//      x rolled by -1 longitude each, permuted to [B, Cl, K, H, L]): contract_psi, one thread per y
//      element, reads the received blocks in place (the cat is index arithmetic) and sums psi's E
//      entries of the row — the same products cuSPARSE's SpMM sums, without L launches and rolls;
//   4. .float().contiguous() + dist.all_reduce in the polar group: ncclAllReduce in place on y
//      (skipped at P = 1);
//   5. the split keeping latitudes p Hl .., torch.split along longitude + .contiguous():
//      pack_longitude_slabs writes the A send blocks [A][B][Cl][K][Hl][Ll] (block j = longitudes j Ll ..);
//   6. dist.all_to_all in the azimuth group again (skipped at A = 1);
//   7. torch.cat along channels + torch.einsum("bgckxy,gock->bgoxy") with groups = 1: per received
//      block j one strided-batched SGEMM over b, out[b] (+)= weight[:, j Cl K ..] Z_j[b] (beta 0 for
//      j = 0, 1 after: the cat is the sum over the blocks' columns of the weight);
//   8. out + bias.reshape(1, -1, 1, 1): add_bias.
// Buffers (pkb_init): the two pairs of all-to-all blocks and y, sized from the size variables.
// cuBLAS runs in its default math mode (pure fp32, no TF32), as PyTorch's einsum does by default.
#include <pkb/solution.h>

#include <stdint.h>

namespace {

constexpr unsigned kThreads = 256;

struct Dims {
  int64_t A, P, K, E, H, L, Hl, Ll, Cl, B, C, O;
};

struct State {
  Dims d{};
  float* send_x = nullptr;  // [A][B][Cl][Hl][Ll]: step 1's blocks
  float* recv_x = nullptr;  // [A][B][Cl][Hl][Ll]: step 2's blocks (block j from azimuth rank j)
  float* y = nullptr;       // [B][Cl][K][H][L]: the contraction, all-reduced in place
  float* send_z = nullptr;  // [A][B][Cl][K][Hl][Ll]: step 5's blocks
  float* recv_z = nullptr;  // [A][B][Cl][K][Hl][Ll]: step 6's blocks (block j = channels j Cl ..)
};

// Blocks for a grid-stride kernel over n elements (the loop covers any excess).
unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

// Purpose: step 1, x [B][C][Hl][Ll] -> send [A][B][Cl][Hl][Ll]. Approach: one thread per element of
// x, grid-stride; `plane` = Hl Ll.
__global__ void pack_channel_slabs(const float* __restrict__ x, float* __restrict__ send, int64_t n, int64_t B,
                                   int64_t C, int64_t Cl, int64_t plane) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t s = i % plane, bc = i / plane, c = bc % C, b = bc / C;
    const int64_t j = c / Cl, cl = c % Cl;
    send[((j * B + b) * Cl + cl) * plane + s] = x[i];
  }
}

// Purpose: step 3, y[b][c'][k][h][lon] = sum_e psi[k][h][e] xa[b][c'][h mod Hl][(h + e (k + 1) + lon)
// mod L], xa being the A received blocks [A][B][Cl][Hl][Ll] cat along longitude (block j holds
// longitudes j Ll ..). Approach: one thread per y element, grid-stride; consecutive threads take
// consecutive longitudes, so the gathers of a warp are contiguous runs (L2-resident: x is small).
__global__ void contract_psi(const float* __restrict__ recv, const float* __restrict__ psi, float* __restrict__ y,
                             int64_t n, Dims d) {
  const uint32_t L = (uint32_t)d.L, H = (uint32_t)d.H, K = (uint32_t)d.K, E = (uint32_t)d.E;
  const uint32_t Hl = (uint32_t)d.Hl, Ll = (uint32_t)d.Ll;
  const int64_t block = d.B * d.Cl;  // (b, c') rows per received block
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const uint32_t lon = (uint32_t)(i % L);
    const int64_t r = i / L;                             // (bc K + k) H + h, bc = b Cl + c'
    const uint32_t h = (uint32_t)(r % H);
    const int64_t bck = r / H;
    const uint32_t k = (uint32_t)(bck % K), hl = h % Hl;
    const int64_t bc = bck / K;
    const float* row = psi + ((int64_t)k * H + h) * E;
    float acc = 0.0f;
    for (uint32_t e = 0; e < E; ++e) {
      const uint32_t lx = (h + e * (k + 1) + lon) % L, j = lx / Ll;
      acc = fmaf(row[e], recv[((j * block + bc) * Hl + hl) * Ll + lx % Ll], acc);
    }
    y[i] = acc;
  }
}

// Purpose: step 5, own latitudes of y [B][Cl][K][H][L] -> send [A][B][Cl][K][Hl][Ll] (block j =
// longitudes j Ll ..). Approach: one thread per send element, grid-stride; reads are contiguous runs
// of Ll.
__global__ void pack_longitude_slabs(const float* __restrict__ y, float* __restrict__ send, int64_t n, Dims d,
                                     int64_t lat0) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t l = i % d.Ll;
    int64_t r = i / d.Ll;
    const int64_t hl = r % d.Hl;
    r /= d.Hl;
    const int64_t bck = r % (d.B * d.Cl * d.K), j = r / (d.B * d.Cl * d.K);  // bck = (b Cl + c') K + k
    send[i] = y[(bck * d.H + lat0 + hl) * d.L + j * d.Ll + l];
  }
}

// Purpose: step 8, out[b][o][s] += bias[o]. Approach: one thread per element, grid-stride.
__global__ void add_bias(float* __restrict__ out, const float* __restrict__ bias, int64_t n, int64_t O,
                         int64_t plane) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] += bias[(i / plane) % O];
}

// Steps 2 and 6: block j of `send` to azimuth group rank j, block j of `recv` from it.
int all_to_all(pkb_context* ctx, const pkb_group* az, const float* send, float* recv, size_t block) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < az->size; ++j) {
    PKB_NCCL(ctx, ncclSend(send + j * block, block, ncclFloat32, j, az->comm, ctx->stream));
    PKB_NCCL(ctx, ncclRecv(recv + j * block, block, ncclFloat32, j, az->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

// Step 7: out[b] (row-major [O][N], N = Hl Ll) = sum_j weight[:, j Cl K .. (j+1) Cl K] Z_j[b], Z_j[b]
// row-major [Cl K][N]. Column-major, per b: out^T (N x O, ld N) = Z_j^T (N x Cl K, ld N) weight_j^T
// (Cl K x O, ld C K).
int einsum_weight(pkb_context* ctx, const Dims& d, const float* z, const float* weight, float* out) {
  const int m = static_cast<int>(d.Hl * d.Ll), n = static_cast<int>(d.O), k = static_cast<int>(d.Cl * d.K);
  const int ldw = static_cast<int>(d.C * d.K);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t j = 0; j < d.A; ++j)
    PKB_CUBLAS(ctx, cublasSgemmStridedBatched(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                              z + j * d.B * k * (int64_t)m, m, (long long)k * m, weight + j * k, ldw,
                                              0, j == 0 ? &zero : &one, out, m, (long long)n * m,
                                              static_cast<int>(d.B)));
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  Dims& d = st->d;
  const char* names[] = {"A", "P", "K", "E", "H", "L", "Hl", "Ll", "Cl", "B", "C", "O"};
  int64_t* fields[] = {&d.A, &d.P, &d.K, &d.E, &d.H, &d.L, &d.Hl, &d.Ll, &d.Cl, &d.B, &d.C, &d.O};
  for (int i = 0; i < 12; ++i) {
    *fields[i] = ctx->param(ctx, names[i], 0);
    if (*fields[i] <= 0) {
      ctx->set_error(ctx, "a size variable or parameter (A P K E H L Hl Ll Cl B C O) is missing");
      return 1;
    }
  }
  const pkb_group* az = ctx->find_group(ctx, "azimuth");
  const pkb_group* polar = ctx->find_group(ctx, "polar");
  if (!az || !polar || az->size != d.A || polar->size != d.P) {
    ctx->set_error(ctx, "the spec's azimuth and polar groups are missing or not of sizes A and P");
    return 1;
  }
  const size_t x_elems = static_cast<size_t>(d.B * d.C * d.Hl * d.Ll);
  const size_t z_elems = static_cast<size_t>(d.A * d.B * d.Cl * d.K * d.Hl * d.Ll);
  PKB_CUDA(ctx, cudaMalloc(&st->y, static_cast<size_t>(d.B * d.Cl * d.K * d.H * d.L) * sizeof(float)));
  PKB_CUDA(ctx, cudaMalloc(&st->send_z, z_elems * sizeof(float)));
  if (d.A > 1) {  // at A = 1 there is no all-to-all: x and send_z are read in place
    PKB_CUDA(ctx, cudaMalloc(&st->send_x, x_elems * sizeof(float)));
    PKB_CUDA(ctx, cudaMalloc(&st->recv_x, x_elems * sizeof(float)));
    PKB_CUDA(ctx, cudaMalloc(&st->recv_z, z_elems * sizeof(float)));
  }
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* st = static_cast<State*>(ctx->user);
  const Dims& d = st->d;
  const pkb_tensor &x = in[0], &psi = in[1], &weight = in[2], &bias = in[3];
  if (x.shape[0] != d.B || x.shape[1] != d.C || x.shape[2] != d.Hl || x.shape[3] != d.Ll || psi.shape[1] != d.H ||
      out[0].shape[1] != d.O) {
    ctx->set_error(ctx, "tensor shapes differ from those pkb_init sized its buffers for");
    return 1;
  }
  const pkb_group* az = ctx->find_group(ctx, "azimuth");
  const pkb_group* polar = ctx->find_group(ctx, "polar");
  cudaStream_t s = ctx->stream;

  // 1-2. channel slabs -> full longitude rows of this rank's channel slab
  const float* xa = static_cast<const float*>(x.data);  // at A = 1 x is already [1][B][C][Hl][L]
  if (d.A > 1) {
    const int64_t n = pkb_numel(&x);
    pack_channel_slabs<<<blocks_for(n), kThreads, 0, s>>>(xa, st->send_x, n, d.B, d.C, d.Cl, d.Hl * d.Ll);
    PKB_LAUNCH(ctx);
    if (all_to_all(ctx, az, st->send_x, st->recv_x, static_cast<size_t>(n / d.A))) return 1;
    xa = st->recv_x;
  }
  // 3. the psi contraction for every output latitude
  const int64_t ny = d.B * d.Cl * d.K * d.H * d.L;
  contract_psi<<<blocks_for(ny), kThreads, 0, s>>>(xa, static_cast<const float*>(psi.data), st->y, ny, d);
  PKB_LAUNCH(ctx);
  // 4. sum over the polar group
  if (d.P > 1)
    PKB_NCCL(ctx, ncclAllReduce(st->y, st->y, static_cast<size_t>(ny), ncclFloat32, ncclSum, polar->comm, s));
  // 5-6. own latitudes, longitude slabs -> all channels of this rank's longitude slab
  const int64_t nz = d.A * d.B * d.Cl * d.K * d.Hl * d.Ll;
  pack_longitude_slabs<<<blocks_for(nz), kThreads, 0, s>>>(st->y, st->send_z, nz, d, polar->rank * d.Hl);
  PKB_LAUNCH(ctx);
  const float* z = st->send_z;
  if (d.A > 1) {
    if (all_to_all(ctx, az, st->send_z, st->recv_z, static_cast<size_t>(nz / d.A))) return 1;
    z = st->recv_z;
  }
  // 7-8. einsum with the weight, then the bias
  float* o = static_cast<float*>(out[0].data);
  if (einsum_weight(ctx, d, z, static_cast<const float*>(weight.data), o)) return 1;
  const int64_t no = pkb_numel(&out[0]);
  add_bias<<<blocks_for(no), kThreads, 0, s>>>(o, static_cast<const float*>(bias.data), no, d.O, d.Hl * d.Ll);
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  ctx->user = nullptr;
  for (float* p : {st->send_x, st->recv_x, st->y, st->send_z, st->recv_z})
    if (p) PKB_CUDA(ctx, cudaFree(p));
  delete st;
  return 0;
}
