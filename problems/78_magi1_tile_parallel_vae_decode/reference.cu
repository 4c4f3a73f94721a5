// Baseline for problem 78 (MAGI-1 tile-parallel VAE decode with a trilinear stub), PKB's steps:
//
//   pkb_init      the tile layout, the deal (sorted by latent numel, largest first, stable; place k
//                 to rank k mod W) and every buffer offset, on the host: they follow from the spec's
//                 shapes, so PKB's all_gather_object of the tile shapes carries nothing to learn
//   decode_tile   per own tile: F.interpolate(tile.float(), (UT, US, US), trilinear, align_corners
//                 False)[:, :3].to(bf16), written straight into the local payload (PKB's torch.cat
//                 layout: own tiles in deal order). Only channels 0..2 are interpolated: PKB computes
//                 all C and keeps 3; the kept values are the same
//   all-gather-v  grouped ncclSend(payload -> every rank) / ncclRecv(rank r's payload <- r): what
//                 PKB's all_to_all_single of the payload repeated W times moves, without the repeat
//   blend_tile    per own tile: clone; rows y < e_h lerped with the tile above, then columns x < e_w
//                 with the tile to the left (its unblended decode), each lerp as PKB's bf16 ops
//                 D(D(prev * (1 - r)) + D(cur * r)), r = idx / e; cropped to KT x KH x KW. One kernel
//                 per tile for PKB's 2 x 64 Python-loop slices (each element's chain is independent)
//   all-gather-v  of the blended tiles, as above
//   assemble      the torch.cat of the tiles into [1, 3, OT, OH, OW], one kernel
//
// Interpolation arithmetic is PyTorch's upsample_trilinear3d: source index (d + 0.5) / U - 0.5
// clamped at 0, the next index clamped at the tile's last, weights in fp32, nested t(h(w)) sums.
#include <cuda_bf16.h>
#include <pkb/solution.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

namespace {

#define PKB_GRID_STRIDE(i, n)                                                              \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

// One decode: the latent window [t0, t0+lt) x [h0, h0+lh) x [w0, w0+lw) of z [1, C, zt, zh, zw],
// up-sampled to [3, dt, dh, dw] = [3, lt ut, lh us, lw us].
struct DecodeArgs {
  long long zt, zh, zw;
  long long t0, h0, w0, lt, lh, lw;
  long long dt, dh, dw;
  float rt, rs;  // 1 / ut, 1 / us (PyTorch's scale when scale_factor is given)
};

struct Tap {
  int i0, p;
  float l0, l1;
};

// PyTorch's area_pixel_compute_source_index (align_corners False, linear) and neighbour clamp.
__device__ __forceinline__ Tap tap(long long d, float scale, long long in) {
  float src = scale * (static_cast<float>(d) + 0.5f) - 0.5f;
  src = src < 0.0f ? 0.0f : src;
  Tap t;
  t.i0 = static_cast<int>(src);
  t.p = t.i0 < in - 1 ? 1 : 0;
  t.l1 = src - static_cast<float>(t.i0);
  t.l0 = 1.0f - t.l1;
  return t;
}

__global__ void decode_tile(const __nv_bfloat16* z, __nv_bfloat16* dst, DecodeArgs a) {
  long long n = 3 * a.dt * a.dh * a.dw;
  PKB_GRID_STRIDE(i, n) {
    long long x = i % a.dw, r = i / a.dw;
    long long y = r % a.dh;
    r /= a.dh;
    long long t = r % a.dt, c = r / a.dt;
    Tap tt = tap(t, a.rt, a.lt), ty = tap(y, a.rs, a.lh), tx = tap(x, a.rs, a.lw);
    auto at = [&](int dt, int dy, int dx) {
      long long zt = a.t0 + tt.i0 + dt * tt.p, zy = a.h0 + ty.i0 + dy * ty.p, zx = a.w0 + tx.i0 + dx * tx.p;
      return __bfloat162float(z[((c * a.zt + zt) * a.zh + zy) * a.zw + zx]);
    };
    float v = tt.l0 * (ty.l0 * (tx.l0 * at(0, 0, 0) + tx.l1 * at(0, 0, 1)) +
                       ty.l1 * (tx.l0 * at(0, 1, 0) + tx.l1 * at(0, 1, 1))) +
              tt.l1 * (ty.l0 * (tx.l0 * at(1, 0, 0) + tx.l1 * at(1, 0, 1)) +
                       ty.l1 * (tx.l0 * at(1, 1, 0) + tx.l1 * at(1, 1, 1)));
    dst[i] = __float2bfloat16_rn(v);
  }
}

// One blend: the decoded tile at `cur` [3, dt, dh, dw], the tile above at `up` [3, dt, up_dh, dw]
// (e_h > 0 only if there is one) and to the left at `left` [3, dt, dh, left_dw]; writes the crop
// [3, kt, kh, kw].
struct BlendArgs {
  long long cur, up, left;  // element offsets into the gathered decoded tiles
  long long dt, dh, dw, up_dh, left_dw;
  long long eh, ew;         // blend extents (0: no neighbour)
  long long kt, kh, kw;
};

// PKB's prev * (1.0 - ratio) + cur * ratio on bf16 tensors: fp32 products with the Python scalar
// as float, each rounded to bf16, then an fp32 add rounded to bf16.
__device__ __forceinline__ float lerp_bf16(float prev, float cur, long long idx, long long extent) {
  double ratio = static_cast<double>(idx) / static_cast<double>(extent);
  float a = __bfloat162float(__float2bfloat16_rn(prev * static_cast<float>(1.0 - ratio)));
  float b = __bfloat162float(__float2bfloat16_rn(cur * static_cast<float>(ratio)));
  return __bfloat162float(__float2bfloat16_rn(a + b));
}

__global__ void blend_tile(const __nv_bfloat16* dec, __nv_bfloat16* dst, BlendArgs a) {
  long long n = 3 * a.kt * a.kh * a.kw;
  PKB_GRID_STRIDE(i, n) {
    long long x = i % a.kw, r = i / a.kw;
    long long y = r % a.kh;
    r /= a.kh;
    long long t = r % a.kt, c = r / a.kt;
    long long plane = c * a.dt + t;  // (c, t) in every tile of this (t, h) or (t, w) neighbourhood
    float v = __bfloat162float(dec[a.cur + (plane * a.dh + y) * a.dw + x]);
    if (y < a.eh) {
      float prev = __bfloat162float(dec[a.up + (plane * a.up_dh + a.up_dh - a.eh + y) * a.dw + x]);
      v = lerp_bf16(prev, v, y, a.eh);
    }
    if (x < a.ew) {
      float prev = __bfloat162float(dec[a.left + (plane * a.dh + y) * a.left_dw + a.left_dw - a.ew + x]);
      v = lerp_bf16(prev, v, x, a.ew);
    }
    dst[i] = __float2bfloat16_rn(v);
  }
}

struct AssembleArgs {
  long long ot, oh, ow;      // video extents
  long long nt, nh, nw;      // tile counts
  long long kt, kh, kw;      // kept extents of every tile but the last of its axis
};

// video [1, 3, ot, oh, ow] from the gathered blended tiles (tile i at element offset off[i]).
__global__ void assemble(const __nv_bfloat16* blended, const long long* off, __nv_bfloat16* video, AssembleArgs a) {
  long long n = 3 * a.ot * a.oh * a.ow;
  PKB_GRID_STRIDE(i, n) {
    long long X = i % a.ow, r = i / a.ow;
    long long Y = r % a.oh;
    r /= a.oh;
    long long T = r % a.ot, c = r / a.ot;
    long long ti = min(T / a.kt, a.nt - 1), hi = min(Y / a.kh, a.nh - 1), wi = min(X / a.kw, a.nw - 1);
    long long kt = ti == a.nt - 1 ? a.ot - ti * a.kt : a.kt;  // the last tiles keep what is left
    long long kh = hi == a.nh - 1 ? a.oh - hi * a.kh : a.kh;
    long long kw = wi == a.nw - 1 ? a.ow - wi * a.kw : a.kw;
    long long t = T - ti * a.kt, y = Y - hi * a.kh, x = X - wi * a.kw;
    video[i] = blended[off[(ti * a.nh + hi) * a.nw + wi] + ((c * kt + t) * kh + y) * kw + x];
  }
}

// The host-side layout (pkb_init).
struct TileInfo {
  long long ti, hi, wi, t0, h0, w0, lt, lh, lw, dt, dh, dw, kt, kh, kw;
  int owner;
  long long dec_off, blend_off;  // element offsets into the gathered buffers (rank-major, deal order)
};

struct State {
  std::vector<TileInfo> tiles;
  std::vector<long long> mine;                     // this rank's tiles, in deal order
  std::vector<long long> dec_at, dec_size;         // per rank: offset and size in the gathered buffers
  std::vector<long long> blend_at, blend_size;
  long long zt = 0, zh = 0, zw = 0, ut = 1, us = 1;
  AssembleArgs asm_args{};
  __nv_bfloat16 *dec_local = nullptr, *dec_all = nullptr, *blend_local = nullptr, *blend_all = nullptr;
  long long* blend_off_dev = nullptr;
};

unsigned grid_stride_blocks(long long n, const pkb_context* ctx) {
  long long cap = 16LL * (ctx->topo.sm_count > 0 ? ctx->topo.sm_count : 132);
  long long b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

// All-gather-v over the world: this rank's `local` (size[rank] elements) to everyone, rank r's into
// all + at[r]. Ranks with nothing to send are skipped on both sides (every rank knows the sizes).
int gather_v(pkb_context* ctx, const __nv_bfloat16* local, __nv_bfloat16* all, const std::vector<long long>& at,
             const std::vector<long long>& size) {
  PKB_NCCL(ctx, ncclGroupStart());
  for (int r = 0; r < ctx->world; ++r) {
    if (size[ctx->rank] > 0)
      PKB_NCCL(ctx, ncclSend(local, static_cast<size_t>(size[ctx->rank]), ncclBfloat16, r, ctx->comm, ctx->stream));
    if (size[r] > 0)
      PKB_NCCL(ctx, ncclRecv(all + at[r], static_cast<size_t>(size[r]), ncclBfloat16, r, ctx->comm, ctx->stream));
  }
  PKB_NCCL(ctx, ncclGroupEnd());
  return 0;
}

long long param(pkb_context* ctx, const char* name) { return ctx->param(ctx, name, 0); }

// The tile layout and deal of PKB's solution (see the spec's summary), with the buffer offsets.
void lay_out(pkb_context* ctx, State* st) {
  const long long C = param(ctx, "C"), LT = param(ctx, "LT"), LH = param(ctx, "LH"), LW = param(ctx, "LW");
  const long long ST = param(ctx, "ST"), SH = param(ctx, "SH"), SW = param(ctx, "SW");
  const long long KT = param(ctx, "KT"), KH = param(ctx, "KH"), KW = param(ctx, "KW");
  st->zt = param(ctx, "TZ");
  st->zh = param(ctx, "HZ");
  st->zw = param(ctx, "WZ");
  st->ut = param(ctx, "UT");
  st->us = param(ctx, "US");
  const long long NT = (st->zt + ST - 1) / ST, NH = (st->zh + SH - 1) / SH, NW = (st->zw + SW - 1) / SW;
  const long long n = NT * NH * NW;
  st->tiles.resize(n);
  std::vector<long long> numel(n), order(n);
  for (long long i = 0; i < n; ++i) {
    TileInfo& t = st->tiles[i];
    t.ti = i / (NH * NW);
    t.hi = i / NW % NH;
    t.wi = i % NW;
    t.t0 = t.ti * ST;
    t.h0 = t.hi * SH;
    t.w0 = t.wi * SW;
    t.lt = std::min(LT, st->zt - t.t0);
    t.lh = std::min(LH, st->zh - t.h0);
    t.lw = std::min(LW, st->zw - t.w0);
    t.dt = t.lt * st->ut;
    t.dh = t.lh * st->us;
    t.dw = t.lw * st->us;
    t.kt = std::min(KT, t.dt);
    t.kh = std::min(KH, t.dh);
    t.kw = std::min(KW, t.dw);
    numel[i] = C * t.lt * t.lh * t.lw;
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](long long a, long long b) { return numel[a] > numel[b]; });
  const int W = ctx->world;
  std::vector<std::vector<long long>> per_rank(W);
  for (long long k = 0; k < n; ++k) per_rank[k % W].push_back(order[k]);
  st->dec_at.assign(W, 0);
  st->dec_size.assign(W, 0);
  st->blend_at.assign(W, 0);
  st->blend_size.assign(W, 0);
  long long dec = 0, blend = 0;
  for (int r = 0; r < W; ++r) {
    st->dec_at[r] = dec;
    st->blend_at[r] = blend;
    for (long long i : per_rank[r]) {
      TileInfo& t = st->tiles[i];
      t.owner = r;
      t.dec_off = dec;
      t.blend_off = blend;
      dec += 3 * t.dt * t.dh * t.dw;
      blend += 3 * t.kt * t.kh * t.kw;
    }
    st->dec_size[r] = dec - st->dec_at[r];
    st->blend_size[r] = blend - st->blend_at[r];
  }
  st->mine = per_rank[ctx->rank];
  st->asm_args = {param(ctx, "OT"), param(ctx, "OH"), param(ctx, "OW"), NT, NH, NW, KT, KH, KW};
}

int run(pkb_context* ctx, const pkb_tensor* in, pkb_tensor* out) {
  State* st = static_cast<State*>(ctx->user);
  const pkb_tensor& z = in[0];
  if (z.shape[2] != st->zt || z.shape[3] != st->zh || z.shape[4] != st->zw) {
    ctx->set_error(ctx, "input shape differs from the size variables pkb_init laid the tiles out for");
    return 1;
  }
  const auto* zp = static_cast<const __nv_bfloat16*>(z.data);
  cudaStream_t s = ctx->stream;
  const long long mine_at = st->dec_at[ctx->rank], mine_blend_at = st->blend_at[ctx->rank];
  for (long long i : st->mine) {
    const TileInfo& t = st->tiles[i];
    DecodeArgs a{st->zt, st->zh, st->zw, t.t0, t.h0, t.w0, t.lt, t.lh, t.lw, t.dt, t.dh, t.dw,
                 1.0f / static_cast<float>(st->ut), 1.0f / static_cast<float>(st->us)};
    decode_tile<<<grid_stride_blocks(3 * t.dt * t.dh * t.dw, ctx), 256, 0, s>>>(zp, st->dec_local + t.dec_off - mine_at,
                                                                               a);
    PKB_LAUNCH(ctx);
  }
  if (gather_v(ctx, st->dec_local, st->dec_all, st->dec_at, st->dec_size)) return 1;
  const AssembleArgs& g = st->asm_args;
  for (long long i : st->mine) {
    const TileInfo& t = st->tiles[i];
    const TileInfo* up = t.hi > 0 ? &st->tiles[i - g.nw] : nullptr;
    const TileInfo* left = t.wi > 0 ? &st->tiles[i - 1] : nullptr;
    const long long BH = param(ctx, "BH"), BW = param(ctx, "BW");
    BlendArgs a{t.dec_off, up ? up->dec_off : 0, left ? left->dec_off : 0, t.dt, t.dh, t.dw,
                up ? up->dh : 0, left ? left->dw : 0,
                up ? std::min({up->dh, t.dh, BH}) : 0, left ? std::min({left->dw, t.dw, BW}) : 0,
                t.kt, t.kh, t.kw};
    blend_tile<<<grid_stride_blocks(3 * t.kt * t.kh * t.kw, ctx), 256, 0, s>>>(
        st->dec_all, st->blend_local + t.blend_off - mine_blend_at, a);
    PKB_LAUNCH(ctx);
  }
  if (gather_v(ctx, st->blend_local, st->blend_all, st->blend_at, st->blend_size)) return 1;
  assemble<<<grid_stride_blocks(3 * g.ot * g.oh * g.ow, ctx), 256, 0, s>>>(
      st->blend_all, st->blend_off_dev, static_cast<__nv_bfloat16*>(out[0].data), g);
  PKB_LAUNCH(ctx);
  return 0;
}

}  // namespace

extern "C" int pkb_init(pkb_context* ctx) {
  State* st = new State;
  ctx->user = st;
  lay_out(ctx, st);
  const int W = ctx->world, rank = ctx->rank;
  const size_t e = sizeof(__nv_bfloat16);
  auto bytes = [&](long long elements) { return static_cast<size_t>(std::max(1LL, elements)) * e; };
  PKB_CUDA(ctx, cudaMalloc(&st->dec_local, bytes(st->dec_size[rank])));
  PKB_CUDA(ctx, cudaMalloc(&st->dec_all, bytes(st->dec_at[W - 1] + st->dec_size[W - 1])));
  PKB_CUDA(ctx, cudaMalloc(&st->blend_local, bytes(st->blend_size[rank])));
  PKB_CUDA(ctx, cudaMalloc(&st->blend_all, bytes(st->blend_at[W - 1] + st->blend_size[W - 1])));
  std::vector<long long> off(st->tiles.size());
  for (size_t i = 0; i < off.size(); ++i) off[i] = st->tiles[i].blend_off;
  PKB_CUDA(ctx, cudaMalloc(&st->blend_off_dev, off.size() * sizeof(long long)));
  PKB_CUDA(ctx, cudaMemcpy(st->blend_off_dev, off.data(), off.size() * sizeof(long long), cudaMemcpyHostToDevice));
  return 0;
}

extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  if (ctx->dtype != PKB_BF16) {
    ctx->set_error(ctx, "problem 78 is bf16 only");
    return 1;
  }
  return run(ctx, in, out);
}

extern "C" int pkb_finalize(pkb_context* ctx) {
  State* st = static_cast<State*>(ctx->user);
  if (!st) return 0;
  for (void* p : {static_cast<void*>(st->dec_local), static_cast<void*>(st->dec_all),
                  static_cast<void*>(st->blend_local), static_cast<void*>(st->blend_all),
                  static_cast<void*>(st->blend_off_dev)})
    PKB_CUDA(ctx, cudaFree(p));
  delete st;
  ctx->user = nullptr;
  return 0;
}
