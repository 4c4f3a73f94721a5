// CPU oracle for problem 78: the assembled video, the same on every rank. Tiles are laid out and
// dealt as PKB's solution does (sorted by latent size, largest first, stable; rank k mod W); each
// tile is up-sampled from its owner's z (trilinear, align_corners False, PyTorch's source-index rule
// and tile-edge clamping) in double and rounded to bf16 (.to(torch.bfloat16)); the blends emulate
// PyTorch's bf16 ops exactly: prev * (1 - r) and cur * r are fp32 products (the Python scalar taken
// as float) rounded to bf16, their sum an fp32 add rounded to bf16, rows first (tile above), then
// columns (tile to the left, its unblended decode). Crop and assembly are index arithmetic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

float bf16(float x) { return pkb::num::bf16_to_float(pkb::num::float_to_bf16(x)); }

struct Axis {
  long long z, lat, stride, up, blend, keep;  // z extent, tile latent size, stride, up-sampling, extents
  long long tiles() const { return (z + stride - 1) / stride; }
  long long start(long long i) const { return i * stride; }
  long long lat_of(long long i) const { return std::min(lat, z - start(i)); }  // latent size of tile i
  long long dec_of(long long i) const { return lat_of(i) * up; }                 // decoded size
};

// PyTorch's source coordinate for output index d (align_corners False, scale 1/up): index i0, the
// next index i0 + p (p = 0 at the last input), and the weight l1 of the next one.
struct Tap {
  long long i0, p;
  double l1;
};
Tap tap(long long d, long long up, long long in) {
  double src = (static_cast<double>(d) + 0.5) / static_cast<double>(up) - 0.5;
  if (src < 0) src = 0;
  long long i0 = static_cast<long long>(src);
  return {i0, i0 < in - 1 ? 1 : 0, src - static_cast<double>(i0)};
}

// A decoded tile [3, dt, dh, dw] (bf16 values).
struct Tile {
  long long dt = 0, dh = 0, dw = 0;
  std::vector<float> v;
  float at(long long c, long long t, long long y, long long x) const { return v[((c * dt + t) * dh + y) * dw + x]; }
};

// Tile (ti, hi, wi) of z [1, C, ZT, ZH, ZW], channels 0..2, up-sampled.
Tile decode(const std::vector<double>& z, const Axis ax[3], long long ti, long long hi, long long wi) {
  const long long lt = ax[0].lat_of(ti), lh = ax[1].lat_of(hi), lw = ax[2].lat_of(wi);
  const long long t0 = ax[0].start(ti), h0 = ax[1].start(hi), w0 = ax[2].start(wi);
  const long long ZT = ax[0].z, ZH = ax[1].z, ZW = ax[2].z;
  Tile out;
  out.dt = ax[0].dec_of(ti);
  out.dh = ax[1].dec_of(hi);
  out.dw = ax[2].dec_of(wi);
  out.v.resize(3 * out.dt * out.dh * out.dw);
  auto zat = [&](long long c, long long t, long long y, long long x) {
    return z[(((c * ZT) + t0 + t) * ZH + h0 + y) * ZW + w0 + x];
  };
  size_t k = 0;
  for (long long c = 0; c < 3; ++c)
    for (long long t = 0; t < out.dt; ++t) {
      const Tap a = tap(t, ax[0].up, lt);
      for (long long y = 0; y < out.dh; ++y) {
        const Tap b = tap(y, ax[1].up, lh);
        for (long long x = 0; x < out.dw; ++x, ++k) {
          const Tap g = tap(x, ax[2].up, lw);
          double s = 0.0;
          for (int it = 0; it < 2; ++it)
            for (int iy = 0; iy < 2; ++iy)
              for (int ix = 0; ix < 2; ++ix) {
                double w = (it ? a.l1 : 1 - a.l1) * (iy ? b.l1 : 1 - b.l1) * (ix ? g.l1 : 1 - g.l1);
                s += w * zat(c, a.i0 + it * a.p, b.i0 + iy * b.p, g.i0 + ix * g.p);
              }
          out.v[k] = bf16(static_cast<float>(s));
        }
      }
    }
  return out;
}

// PKB's lerp of one element: prev * (1 - r) + cur * r, each op in fp32 rounded to bf16.
float lerp(float prev, float cur, long long idx, long long extent) {
  const double ratio = static_cast<double>(idx) / static_cast<double>(extent);
  const float a = bf16(prev * static_cast<float>(1.0 - ratio));
  const float b = bf16(cur * static_cast<float>(ratio));
  return bf16(a + b);
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const long long C = io.param("C");
  const Axis ax[3] = {
      {io.param("TZ"), io.param("LT"), io.param("ST"), io.param("UT"), 0, io.param("KT")},
      {io.param("HZ"), io.param("LH"), io.param("SH"), io.param("US"), io.param("BH"), io.param("KH")},
      {io.param("WZ"), io.param("LW"), io.param("SW"), io.param("US"), io.param("BW"), io.param("KW")},
  };
  const long long NT = ax[0].tiles(), NH = ax[1].tiles(), NW = ax[2].tiles(), n_tiles = NT * NH * NW;
  // Owners: sorted by latent numel, largest first, ties in index order; place k goes to rank k % W.
  std::vector<long long> numel(n_tiles), order(n_tiles);
  for (long long i = 0; i < n_tiles; ++i) {
    numel[i] = C * ax[0].lat_of(i / (NH * NW)) * ax[1].lat_of(i / NW % NH) * ax[2].lat_of(i % NW);
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](long long a, long long b) { return numel[a] > numel[b]; });
  std::vector<int> owner(n_tiles);
  for (long long k = 0; k < n_tiles; ++k) owner[order[k]] = static_cast<int>(k % W);
  std::vector<Tile> dec(n_tiles);
  for (long long i = 0; i < n_tiles; ++i)
    dec[i] = decode(io.inputs[owner[i]][0].values, ax, i / (NH * NW), i / NW % NH, i % NW);

  const long long OT = io.param("OT"), OH = io.param("OH"), OW = io.param("OW");
  std::vector<double>& video = io.outputs[0][0].values;
  for (long long i = 0; i < n_tiles; ++i) {
    const long long ti = i / (NH * NW), hi = i / NW % NH, wi = i % NW;
    const Tile& cur = dec[i];
    const Tile* up = hi > 0 ? &dec[i - NW] : nullptr;   // (t, h-1, w)
    const Tile* left = wi > 0 ? &dec[i - 1] : nullptr;  // (t, h, w-1)
    const long long eh = up ? std::min({up->dh, cur.dh, ax[1].blend}) : 0;
    const long long ew = left ? std::min({left->dw, cur.dw, ax[2].blend}) : 0;
    const long long kt = std::min(ax[0].keep, cur.dt), kh = std::min(ax[1].keep, cur.dh),
                    kw = std::min(ax[2].keep, cur.dw);
    for (long long c = 0; c < 3; ++c)
      for (long long t = 0; t < kt; ++t)
        for (long long y = 0; y < kh; ++y)
          for (long long x = 0; x < kw; ++x) {
            float v = cur.at(c, t, y, x);
            if (y < eh) v = lerp(up->at(c, t, up->dh - eh + y, x), v, y, eh);
            if (x < ew) v = lerp(left->at(c, t, y, left->dw - ew + x), v, x, ew);
            const long long T = ti * ax[0].keep + t, Y = hi * ax[1].keep + y, X = wi * ax[2].keep + x;
            video[((c * OT + T) * OH + Y) * OW + X] = v;
          }
  }
  for (int r = 1; r < W; ++r) io.outputs[r][0].values = video;
}
