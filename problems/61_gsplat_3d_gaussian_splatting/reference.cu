// Baseline for problem 61 (gsplat's distributed projection and packing). PKB's solution(), step by
// step, with the same collectives:
//   1. all-gather of the cameras (PKB's _all_gather_tensor_list of [viewmats, Ks], one tensor of 25
//      values per camera; PKB also all-gathers N, which is the spec's N on every rank);
//   2. covariance and fully_fused_projection of every (camera, Gaussian) pair, one thread each, in
//      fp32 (PyTorch runs the same formulas op by op in bf16); one row per pair is staged with the
//      ids PKB computes on the sending side (camera_ids - C dest, gaussian_ids + N dest);
//   3. _pack_projection_results: the visible pairs, camera-major: per-tile counts, a scan, and the
//      rows copied to the send buffer, each destination's cameras contiguous;
//   4. all_to_all of the counts (one int32 per peer, grouped ncclSend / ncclRecv), then the host reads
//      them (PKB's .item() calls: the stream is synchronized here);
//   5. all_to_all of the rows with those splits. PKB runs three (radii; means2d, depths, conics,
//      opacities and colors; camera and Gaussian ids) of the same splits; here every field of a row
//      travels in one 36-byte record, one exchange;
//   6. the received records unpacked into the eight outputs, -1 past the n received rows.
#include <pkb/solution.h>

#include <cuda_bf16.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;   // Gaussians per tile (one block), and warps per block = 8
constexpr int kCamVals = 25;    // a camera: viewmat (16) then K (9)
constexpr int kMaxWorld = 64;   // host count arrays

/// One visible (Gaussian, camera) pair as it travels: ids, radii, then the bf16 values
/// means2d x, y, depth, conics a, b, c, opacity, colors 0..2.
struct Row {
  int32_t camera_id, gaussian_id, radius[2];
  __nv_bfloat16 v[10];
};
static_assert(sizeof(Row) == 36, "a row is 9 int32 words on the wire");
constexpr int kRowWords = sizeof(Row) / 4;

struct Setup {
  float width, height, eps2d, near_plane, far_plane;
};

struct State {
  __nv_bfloat16* cams_local = nullptr;  // [C, 25]
  __nv_bfloat16* cams = nullptr;        // [W C, 25], global camera g = rank C + c
  Row* staged = nullptr;                // [W C, N]: every pair
  uint8_t* visible = nullptr;           // [W C, N]
  int32_t* tile_counts = nullptr;       // [W C, T]: visible pairs per tile of Gaussians
  int32_t* counts = nullptr;            // [2 W]: rows to each destination, rows from each source
  Row* sendbuf = nullptr;               // [W, C N]: destination j's rows from j C N on
  Row* recvbuf = nullptr;               // [W C N]: the rows received, in source order
  int32_t* host = nullptr;              // pinned [2 W]
};

__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

/// cams_local[c] = (viewmats[c], Ks[c]), the tensor list PKB concatenates before gathering.
__global__ void pack_cameras(const __nv_bfloat16* __restrict__ viewmats, const __nv_bfloat16* __restrict__ Ks, int C,
                             __nv_bfloat16* __restrict__ out) {
  for (int k = threadIdx.x; k < C * kCamVals; k += blockDim.x) {
    const int c = k / kCamVals, j = k % kCamVals;
    out[k] = j < 16 ? viewmats[16 * c + j] : Ks[9 * c + j - 16];
  }
}

/// Purpose: covariance + pinhole projection of Gaussian i into camera g (PKB's _torch_impl formulas).
/// Returns whether the pair is visible and fills its row.
__device__ bool project(const __nv_bfloat16* __restrict__ means, const __nv_bfloat16* __restrict__ quats,
                        const __nv_bfloat16* __restrict__ scales, int64_t i, const __nv_bfloat16* __restrict__ cam,
                        const Setup& p, Row& row) {
  // Covariance: R(normalize(q)) diag(s), times its transpose.
  float q[4], n = 0.f;
  for (int k = 0; k < 4; ++k) {
    q[k] = ld(quats, 4 * i + k);
    n += q[k] * q[k];
  }
  n = fmaxf(sqrtf(n), 1e-12f);
  const float w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  const float R[3][3] = {{1.f - 2.f * (y * y + z * z), 2.f * (x * y - w * z), 2.f * (x * z + w * y)},
                         {2.f * (x * y + w * z), 1.f - 2.f * (x * x + z * z), 2.f * (y * z - w * x)},
                         {2.f * (x * z - w * y), 2.f * (y * z + w * x), 1.f - 2.f * (x * x + y * y)}};
  float M[3][3];
  for (int a = 0; a < 3; ++a)
    for (int j = 0; j < 3; ++j) M[a][j] = R[a][j] * ld(scales, 3 * i + j);
  float S[3][3];
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) S[a][b] = M[a][0] * M[b][0] + M[a][1] * M[b][1] + M[a][2] * M[b][2];
  // World to camera: mean and covariance (V S V^T with V = viewmat[:3, :3]).
  float V[12], K[9];
  for (int k = 0; k < 12; ++k) V[k] = __bfloat162float(cam[k]);
  for (int k = 0; k < 9; ++k) K[k] = __bfloat162float(cam[16 + k]);
  float mc[3];
  const float m0 = ld(means, 3 * i), m1 = ld(means, 3 * i + 1), m2 = ld(means, 3 * i + 2);
  for (int a = 0; a < 3; ++a) mc[a] = V[4 * a] * m0 + V[4 * a + 1] * m1 + V[4 * a + 2] * m2 + V[4 * a + 3];
  float VS[3][3], Sc[3][3];
  for (int a = 0; a < 3; ++a)
    for (int k = 0; k < 3; ++k) VS[a][k] = V[4 * a] * S[0][k] + V[4 * a + 1] * S[1][k] + V[4 * a + 2] * S[2][k];
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) Sc[a][b] = VS[a][0] * V[4 * b] + VS[a][1] * V[4 * b + 1] + VS[a][2] * V[4 * b + 2];
  // Perspective: clamped Jacobian, 2D covariance, projected mean.
  const float tx = mc[0], ty = mc[1], tz = mc[2];
  const float fx = K[0], fy = K[4], cx = K[2], cy = K[5];
  const float tan_x = 0.5f * p.width / fx, tan_y = 0.5f * p.height / fy;
  const float lim_xp = (p.width - cx) / fx + 0.3f * tan_x, lim_xn = cx / fx + 0.3f * tan_x;
  const float lim_yp = (p.height - cy) / fy + 0.3f * tan_y, lim_yn = cy / fy + 0.3f * tan_y;
  const float txc = tz * fminf(fmaxf(tx / tz, -lim_xn), lim_xp);
  const float tyc = tz * fminf(fmaxf(ty / tz, -lim_yn), lim_yp);
  const float J[2][3] = {{fx / tz, 0.f, -fx * txc / (tz * tz)}, {0.f, fy / tz, -fy * tyc / (tz * tz)}};
  float JS[2][3], c[2][2];
  for (int a = 0; a < 2; ++a)
    for (int k = 0; k < 3; ++k) JS[a][k] = J[a][0] * Sc[0][k] + J[a][1] * Sc[1][k] + J[a][2] * Sc[2][k];
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) c[a][b] = JS[a][0] * J[b][0] + JS[a][1] * J[b][1] + JS[a][2] * J[b][2];
  const float mx = (K[0] * mc[0] + K[1] * mc[1] + K[2] * mc[2]) / tz;
  const float my = (K[3] * mc[0] + K[4] * mc[1] + K[5] * mc[2]) / tz;
  const float c00 = c[0][0] + p.eps2d, c11 = c[1][1] + p.eps2d, c01 = c[0][1], c10 = c[1][0];
  const float det = fmaxf(c00 * c11 - c01 * c10, 1e-10f);
  // Radii, zeroed outside the near/far range, then outside the image (PKB's order).
  float rx = ceilf(3.33f * sqrtf(c00)), ry = ceilf(3.33f * sqrtf(c11));
  if (!(tz > p.near_plane && tz < p.far_plane)) rx = ry = 0.f;
  const bool inside = mx + rx > 0.f && mx - rx < p.width && my + ry > 0.f && my - ry < p.height;
  if (!inside) rx = ry = 0.f;
  const bool vis = rx > 0.f && ry > 0.f;
  row.radius[0] = vis ? static_cast<int32_t>(rx) : 0;
  row.radius[1] = vis ? static_cast<int32_t>(ry) : 0;
  const float vals[6] = {mx, my, tz, c11 / det, -(c01 + c10) / 2.f / det, c00 / det};
  for (int k = 0; k < 6; ++k) row.v[k] = __float2bfloat16_rn(vals[k]);
  return vis;
}

/// Step 2. Block (tile, g): Gaussians tile * 256 .. of this rank in camera g; staged[g N + i], visible
/// flags, and the tile's visible count.
__global__ void project_pairs(const __nv_bfloat16* __restrict__ means, const __nv_bfloat16* __restrict__ quats,
                              const __nv_bfloat16* __restrict__ scales, const __nv_bfloat16* __restrict__ opacities,
                              const __nv_bfloat16* __restrict__ colors, const __nv_bfloat16* __restrict__ cams, int64_t N,
                              int C, Setup p, Row* __restrict__ staged, uint8_t* __restrict__ visible,
                              int32_t* __restrict__ tile_counts) {
  const int g = blockIdx.y;
  const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  bool vis = false;
  if (i < N) {
    Row row;
    vis = project(means, quats, scales, i, cams + (int64_t)g * kCamVals, p, row);
    row.camera_id = g % C;                               // PKB: camera_ids - C dest
    row.gaussian_id = (int32_t)(i + (int64_t)(g / C) * N);  // PKB: gaussian_ids + N dest (dest, not source)
    row.v[6] = opacities[i];
    for (int k = 0; k < 3; ++k) row.v[7 + k] = colors[3 * i + k];
    staged[(int64_t)g * N + i] = row;
    visible[(int64_t)g * N + i] = vis ? 1 : 0;
  }
  const int n = __syncthreads_count(vis);
  if (threadIdx.x == 0) tile_counts[(int64_t)g * gridDim.x + blockIdx.x] = n;
}

/// Sum of v[0 .. n - 1] over the block (every thread gets it).
__device__ int64_t block_sum(const int32_t* __restrict__ v, int64_t n) {
  __shared__ int64_t part[kThreads];
  int64_t s = 0;
  for (int64_t k = threadIdx.x; k < n; k += kThreads) s += v[k];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const int64_t total = part[0];
  __syncthreads();
  return total;
}

/// Step 3. Block (tile, g), g = j C + c: the visible rows of the tile to destination j's region of the
/// send buffer, after the rows of j's cameras before c and of the tiles before this one (camera-major,
/// Gaussians ascending).
__global__ void compact_pairs(const Row* __restrict__ staged, const uint8_t* __restrict__ visible,
                              const int32_t* __restrict__ tile_counts, int64_t N, int C, Row* __restrict__ sendbuf) {
  const int g = blockIdx.y, j = g / C, c = g % C, T = gridDim.x;
  // tile_counts of destination j's cameras are contiguous: the rows before this tile are a prefix.
  const int64_t base = block_sum(tile_counts + (int64_t)j * C * T, (int64_t)c * T + blockIdx.x);
  const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  const bool f = i < N && visible[(int64_t)g * N + i];
  const unsigned ballot = __ballot_sync(0xffffffffu, f);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ int warp_total[kThreads / 32];
  if (lane == 0) warp_total[warp] = __popc(ballot);
  __syncthreads();
  int before = __popc(ballot & ((1u << lane) - 1u));
  for (int k = 0; k < warp; ++k) before += warp_total[k];
  if (f) sendbuf[(int64_t)j * C * N + base + before] = staged[(int64_t)g * N + i];
}

/// Rows to each destination j (PKB's cnts: the bincount summed over j's cameras), one block each.
__global__ void destination_counts(const int32_t* __restrict__ tile_counts, int C, int T, int32_t* __restrict__ counts) {
  const int64_t n = block_sum(tile_counts + (int64_t)blockIdx.x * C * T, (int64_t)C * T);
  if (threadIdx.x == 0) counts[blockIdx.x] = (int32_t)n;
}

/// Step 6. Output row k: the k-th received record, or -1 everywhere past the n received.
__global__ void unpack_rows(const Row* __restrict__ rows, int64_t n, int64_t cap, int32_t* __restrict__ camera_ids,
                            int32_t* __restrict__ gaussian_ids, int32_t* __restrict__ radii,
                            __nv_bfloat16* __restrict__ means2d, __nv_bfloat16* __restrict__ depths,
                            __nv_bfloat16* __restrict__ conics, __nv_bfloat16* __restrict__ opacities,
                            __nv_bfloat16* __restrict__ colors) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < cap; k += (int64_t)gridDim.x * blockDim.x) {
    if (k < n) {
      const Row r = rows[k];
      camera_ids[k] = r.camera_id;
      gaussian_ids[k] = r.gaussian_id;
      radii[2 * k] = r.radius[0];
      radii[2 * k + 1] = r.radius[1];
      means2d[2 * k] = r.v[0];
      means2d[2 * k + 1] = r.v[1];
      depths[k] = r.v[2];
      for (int a = 0; a < 3; ++a) conics[3 * k + a] = r.v[3 + a];
      opacities[k] = r.v[6];
      for (int a = 0; a < 3; ++a) colors[3 * k + a] = r.v[7 + a];
    } else {
      const __nv_bfloat16 m1 = __float2bfloat16_rn(-1.f);
      camera_ids[k] = gaussian_ids[k] = radii[2 * k] = radii[2 * k + 1] = -1;
      means2d[2 * k] = m1;
      means2d[2 * k + 1] = m1;
      depths[k] = m1;
      opacities[k] = m1;
      for (int a = 0; a < 3; ++a) {
        conics[3 * k + a] = m1;
        colors[3 * k + a] = m1;
      }
    }
  }
}

struct Shape {
  int64_t N, C, T, cap;
};

Shape shape_of(const pkb_context* ctx) {
  Shape s;
  s.N = ctx->param(ctx, "N", 0);
  s.C = ctx->param(ctx, "C", 0);
  s.T = (s.N + kThreads - 1) / kThreads;
  s.cap = ctx->world * s.C * s.N;
  return s;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* s = new State;
  ctx->user = s;
  const int W = ctx->world;
  if (W > kMaxWorld) {
    ctx->set_error(ctx, "more ranks than this baseline's host count arrays hold");
    return 1;
  }
  if (ctx->abi_version < 2) {
    ctx->set_error(ctx, "this baseline reads real parameters (eps2d, near_plane): it needs ABI 2");
    return 1;
  }
  const Shape sh = shape_of(ctx);
  const size_t pairs = (size_t)sh.cap;
  PKB_CUDA(ctx, cudaMalloc(&s->cams_local, sh.C * kCamVals * sizeof(__nv_bfloat16)));
  PKB_CUDA(ctx, cudaMalloc(&s->cams, W * sh.C * kCamVals * sizeof(__nv_bfloat16)));
  PKB_CUDA(ctx, cudaMalloc(&s->staged, pairs * sizeof(Row)));
  PKB_CUDA(ctx, cudaMalloc(&s->visible, pairs));
  PKB_CUDA(ctx, cudaMalloc(&s->tile_counts, W * sh.C * sh.T * sizeof(int32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->counts, 2 * W * sizeof(int32_t)));
  PKB_CUDA(ctx, cudaMalloc(&s->sendbuf, pairs * sizeof(Row)));
  PKB_CUDA(ctx, cudaMalloc(&s->recvbuf, pairs * sizeof(Row)));
  PKB_CUDA(ctx, cudaMallocHost(&s->host, 2 * W * sizeof(int32_t)));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  State* s = static_cast<State*>(ctx->user);
  const int W = ctx->world;
  const Shape sh = shape_of(ctx);
  if (in[0].shape[0] != sh.N || in[5].shape[0] != sh.C || out[0].shape[0] != sh.cap) {
    ctx->set_error(ctx, "inputs or outputs do not have the spec's N, C or W C N rows");
    return 1;
  }
  const Setup p{(float)ctx->param(ctx, "width", 0), (float)ctx->param(ctx, "height", 0),
                (float)ctx->fparam(ctx, "eps2d", 0.0), (float)ctx->fparam(ctx, "near_plane", 0.0),
                (float)ctx->fparam(ctx, "far_plane", 0.0)};
  auto bf = [&](int k) { return static_cast<const __nv_bfloat16*>(in[k].data); };
  cudaStream_t st = ctx->stream;
  // 1. Every rank's cameras.
  pack_cameras<<<1, kThreads, 0, st>>>(bf(5), bf(6), (int)sh.C, s->cams_local);
  PKB_LAUNCH(ctx);
  PKB_NCCL(ctx, ncclAllGather(s->cams_local, s->cams, (size_t)sh.C * kCamVals, ncclBfloat16, ctx->comm, st));
  // 2-3. Project every pair, pack the visible ones camera-major, count them per destination.
  const dim3 grid((unsigned)sh.T, (unsigned)(W * sh.C));
  project_pairs<<<grid, kThreads, 0, st>>>(bf(0), bf(1), bf(2), bf(3), bf(4), s->cams, sh.N, (int)sh.C, p, s->staged,
                                           s->visible, s->tile_counts);
  compact_pairs<<<grid, kThreads, 0, st>>>(s->staged, s->visible, s->tile_counts, sh.N, (int)sh.C, s->sendbuf);
  destination_counts<<<W, kThreads, 0, st>>>(s->tile_counts, (int)sh.C, (int)sh.T, s->counts);
  PKB_LAUNCH(ctx);
  // 4. Counts to every peer; the host needs both directions' splits.
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    PKB_NCCL(ctx, ncclSend(s->counts + j, 1, ncclInt32, j, ctx->comm, st));
    PKB_NCCL(ctx, ncclRecv(s->counts + W + j, 1, ncclInt32, j, ctx->comm, st));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  PKB_CUDA(ctx, cudaMemcpyAsync(s->host, s->counts, 2 * W * sizeof(int32_t), cudaMemcpyDeviceToHost, st));
  PKB_CUDA(ctx, cudaStreamSynchronize(st));
  // 5. The rows, destination j's from j C N on in the send buffer, source order in the receive buffer.
  int64_t received = 0;
  PKB_NCCL(ctx, ncclGroupStart());
  for (int j = 0; j < W; ++j) {
    const int64_t ns = s->host[j], nr = s->host[W + j];
    if (ns > 0)
      PKB_NCCL(ctx, ncclSend(s->sendbuf + (int64_t)j * sh.C * sh.N, (size_t)(ns * kRowWords), ncclInt32, j, ctx->comm, st));
    if (nr > 0) PKB_NCCL(ctx, ncclRecv(s->recvbuf + received, (size_t)(nr * kRowWords), ncclInt32, j, ctx->comm, st));
    received += nr;
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  if (received > sh.cap) {
    ctx->set_error(ctx, "more rows received than W C N");
    return 1;
  }
  // 6. Rows to the eight outputs, -1 padding.
  const unsigned blocks = (unsigned)((sh.cap + kThreads - 1) / kThreads);
  unpack_rows<<<blocks, kThreads, 0, st>>>(s->recvbuf, received, sh.cap, static_cast<int32_t*>(out[0].data),
                                           static_cast<int32_t*>(out[1].data), static_cast<int32_t*>(out[2].data),
                                           static_cast<__nv_bfloat16*>(out[3].data), static_cast<__nv_bfloat16*>(out[4].data),
                                           static_cast<__nv_bfloat16*>(out[5].data), static_cast<__nv_bfloat16*>(out[6].data),
                                           static_cast<__nv_bfloat16*>(out[7].data));
  PKB_LAUNCH(ctx);
  return 0;
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* s = static_cast<State*>(ctx->user);
  if (!s) return 0;
  PKB_CUDA(ctx, cudaFree(s->cams_local));
  PKB_CUDA(ctx, cudaFree(s->cams));
  PKB_CUDA(ctx, cudaFree(s->staged));
  PKB_CUDA(ctx, cudaFree(s->visible));
  PKB_CUDA(ctx, cudaFree(s->tile_counts));
  PKB_CUDA(ctx, cudaFree(s->counts));
  PKB_CUDA(ctx, cudaFree(s->sendbuf));
  PKB_CUDA(ctx, cudaFree(s->recvbuf));
  PKB_CUDA(ctx, cudaFreeHost(s->host));
  delete s;
  ctx->user = nullptr;
  return 0;
}
