// Input distributions, evaluated per element from Philox bits, identically on host and device.
//
// Arithmetic is chosen so that host and device round the same way: integer sums, products by
// powers of two, and explicit fma() where a multiply-add is wanted (so that nvcc's contraction
// cannot change a result).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.hpp"
#include "core/philox.hpp"

namespace pkb {

enum class DistKind : int32_t {
  normal,   // approximately N(a, b^2): centred Irwin-Hall sum of four 24-bit uniforms, scaled to
            // unit variance (bounded to +-3.46 sigma; exact integer arithmetic)
  uniform,  // uniform in [a, b)
  grid,     // k * a for an integer k uniform in [lo, hi]: with a power-of-two a, sums of such
            // values are exact in any order (reductions that every correct algorithm gets
            // bit-identically, as nccl-tests does)
  randint,  // integer uniform in [lo, hi]
  zeros,
  ones,
  arange,   // element index (lo + index)
  split,    // one row or column of a random W x W count matrix whose rows and columns all sum to
            // `total` (all-to-all split sizes every rank agrees on); see split_count
  spread,   // a grid's held-out redraw (held_out below): continuous in [lo * a, hi * a), times 2^-s
            // for s uniform in 0..7, so that values are off the grid and of mixed magnitudes
};

/// One distribution, trivially copyable so that it can be passed to kernels.
/// For `split`: lo = total, hi = W, a = side (0: this rank's sends, row `rank`; 1: its receives,
/// column `rank`), b = rank.
struct Dist {
  DistKind kind = DistKind::normal;
  double a = 0.0;
  double b = 1.0;
  int64_t lo = 0;
  int64_t hi = 0;
  bool shared = false;   // the same values on every rank: the key ignores the rank
  int64_t slot = -1;     // key slot instead of the tensor index (>= 0: tensors with one slot share draws)
  int64_t share_group = -1;  // >= 0: this rank's value of the input's `shared_by`; ranks with one value
                             // draw alike (the key uses kShareGroupBase + share_group for the rank)
  bool heldout = false;  // a floating grid input that held-out calls redraw as `spread` (held_out)
};

/// Held-out calls: the odd trials and every warm-up and timed call. Their grid-drawn floating inputs
/// become `spread` draws, so that a solution specialised to the spec's grid (exact sums, values
/// that fit in int8) is wrong there; their floating outputs are compared under the norm-wise
/// bound of Comparison::heldout_rtol (spec/spec.hpp).
inline constexpr bool heldout_trial(uint64_t trial) { return trial % 2 == 1; }

/// The distribution a held-out call draws `d` from.
PKB_HD Dist held_out(Dist d) {
  if (d.heldout && d.kind == DistKind::grid) d.kind = DistKind::spread;
  return d;
}

/// Whether two ranks' tensors are drawn alike, for listing ranks together (a split's `b` is the
/// rank, which its description does not name).
inline bool same_draw(const Dist& x, const Dist& y) {
  return x.kind == y.kind && x.a == y.a && (x.b == y.b || x.kind == DistKind::split) && x.lo == y.lo &&
         x.hi == y.hi && x.shared == y.shared && x.slot == y.slot && (x.share_group < 0) == (y.share_group < 0) && x.heldout == y.heldout;
}

/// The key slot of `split` matrices, offset so that it cannot meet a tensor index.
inline constexpr int64_t kSplitSlotBase = 1 << 20;
/// The rank that shared tensors are keyed with.
inline constexpr uint64_t kSharedRank = 0xFFFFFFFFull;

/// The rank that tensors shared within a sub-group (shared_by) are keyed with: this base plus the
/// group's value, above every rank and kSharedRank.
inline constexpr uint64_t kShareGroupBase = 1ull << 32;

/// Key of input `tensor` of `rank` for (seed, stream), honouring shared tensors (every rank, or
/// ranks with one `shared_by` value) and key slots.
PKB_HD uint64_t input_key(uint64_t seed, uint64_t stream, uint64_t rank, uint64_t tensor, const Dist& d) {
  uint64_t who = d.shared ? kSharedRank
                 : d.share_group >= 0 ? kShareGroupBase + static_cast<uint64_t>(d.share_group)
                                      : rank;
  return rng::tensor_key(seed, stream, who, d.slot >= 0 ? static_cast<uint64_t>(d.slot) : tensor);
}

/// Entry (from, to) of the split matrix keyed by `key`: rows sent from rank `from` to rank `to`.
/// The matrix is sum_k c_k P_k over K in 1..min(W, 4) random permutations P_k (shifts and
/// reflections i -> +-i + s mod W) with weights c_k, a random composition of `total` in which some
/// parts are zero. Every row and column therefore sums to `total`, entries are often zero (empty
/// splits), and any element can be computed on its own, on host or device.
PKB_HD int64_t split_count(uint64_t key, int64_t world, int64_t total, int64_t from, int64_t to) {
  constexpr uint64_t kBase = 1ull << 62;  // counters no element index reaches
  if (world <= 0) return 0;
  rng::U32x4 head = rng::element_bits(key, kBase);
  int parts = 1 + static_cast<int>(head.v[0] % static_cast<uint32_t>(world < 4 ? world : 4));
  uint32_t weight[4] = {0, 0, 0, 0}, sum = 0;
  int64_t shift[4] = {0, 0, 0, 0};
  bool reflect[4] = {false, false, false, false};
  for (int k = 0; k < parts; ++k) {
    rng::U32x4 r = rng::element_bits(key, kBase + 1 + static_cast<uint64_t>(k));
    weight[k] = (r.v[0] & 3u) == 0 ? 0u : 1u + r.v[1] % 16u;
    shift[k] = static_cast<int64_t>(r.v[2] % static_cast<uint32_t>(world));
    reflect[k] = (r.v[3] & 1u) != 0;
    sum += weight[k];
  }
  if (sum == 0) weight[0] = sum = 1;
  int64_t count = 0;
  uint32_t prefix = 0;
  for (int k = 0; k < parts; ++k) {
    int64_t lo = total * static_cast<int64_t>(prefix) / sum;
    prefix += weight[k];
    int64_t hi = total * static_cast<int64_t>(prefix) / sum;
    int64_t image = ((reflect[k] ? world - 1 - from : from) + shift[k]) % world;
    if (image == to) count += hi - lo;
  }
  return count;
}

namespace detail {
PKB_HD uint64_t bounded(uint64_t bits, uint64_t range) { return range == 0 ? bits : bits % range; }
PKB_HD uint64_t bits64(const rng::U32x4& r) {
  return (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
}
}  // namespace detail

/// The value of one element as a float (for bf16 / fp16 / fp32 tensors).
PKB_HD float sample_float(const Dist& d, const rng::U32x4& r) {
  switch (d.kind) {
    case DistKind::normal: {
      uint32_t s = (r.v[0] >> 8) + (r.v[1] >> 8) + (r.v[2] >> 8) + (r.v[3] >> 8);  // < 2^26
      float centred = static_cast<float>(s) * 0x1p-24f - 2.0f;  // exact product, one rounding
      float z = centred * 1.7320508075688772f;                   // unit variance
      return fmaf(static_cast<float>(d.b), z, static_cast<float>(d.a));
    }
    case DistKind::uniform: {
      float u = static_cast<float>(r.v[0] >> 8) * 0x1p-24f;
      float span = static_cast<float>(d.b) - static_cast<float>(d.a);
      return fmaf(span, u, static_cast<float>(d.a));
    }
    case DistKind::grid: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      int64_t k = d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range));
      return static_cast<float>(k) * static_cast<float>(d.a);
    }
    case DistKind::randint: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      return static_cast<float>(d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range)));
    }
    case DistKind::spread: {
      // Products by powers of two and one explicit fma: the same bits on host and device.
      float u = static_cast<float>(r.v[2] >> 8) * 0x1p-24f;
      float span = static_cast<float>(d.hi - d.lo);
      float t = fmaf(span, u, static_cast<float>(d.lo));
      return t * static_cast<float>(d.a) * (static_cast<float>(128u >> (r.v[3] & 7u)) * 0x1p-7f);
    }
    case DistKind::zeros: return 0.0f;
    case DistKind::ones: return 1.0f;
    case DistKind::arange: return 0.0f;  // handled by the caller, which knows the index
    case DistKind::split: return 0.0f;   // integer tensors only (checked when a spec resolves)
  }
  return 0.0f;
}

/// The value of one element as a double (for fp64 tensors).
PKB_HD double sample_double(const Dist& d, const rng::U32x4& r) {
  switch (d.kind) {
    case DistKind::normal: {
      uint64_t s = static_cast<uint64_t>(r.v[0] >> 8) + (r.v[1] >> 8) + (r.v[2] >> 8) + (r.v[3] >> 8);
      double centred = static_cast<double>(s) * 0x1p-24 - 2.0;
      double z = centred * 1.7320508075688772;
      return fma(d.b, z, d.a);
    }
    case DistKind::uniform: {
      double u = static_cast<double>(detail::bits64(r) >> 11) * 0x1p-53;
      return fma(d.b - d.a, u, d.a);
    }
    case DistKind::spread: {
      double u = static_cast<double>(detail::bits64(r) >> 11) * 0x1p-53;
      double t = fma(static_cast<double>(d.hi - d.lo), u, static_cast<double>(d.lo));
      return t * d.a * (static_cast<double>(128u >> (r.v[3] & 7u)) * 0x1p-7);
    }
    default: return static_cast<double>(sample_float(d, r));
  }
}

/// The value of one element as an integer (for integer and bool tensors).
PKB_HD int64_t sample_int(const Dist& d, const rng::U32x4& r, uint64_t index) {
  switch (d.kind) {
    case DistKind::randint:
    case DistKind::grid: {
      uint64_t range = static_cast<uint64_t>(d.hi - d.lo) + 1;
      return d.lo + static_cast<int64_t>(detail::bounded(detail::bits64(r), range));
    }
    case DistKind::ones: return 1;
    case DistKind::arange: return d.lo + static_cast<int64_t>(index);
    default: return 0;
  }
}

/// Element `index` of an integer tensor keyed by `key` (split matrices need the key itself).
PKB_HD int64_t sample_int_at(const Dist& d, uint64_t key, uint64_t index) {
  if (d.kind == DistKind::split) {
    int64_t rank = static_cast<int64_t>(d.b), other = static_cast<int64_t>(index);
    return d.a == 0.0 ? split_count(key, d.hi, d.lo, rank, other) : split_count(key, d.hi, d.lo, other, rank);
  }
  return sample_int(d, rng::element_bits(key, index), index);
}

}  // namespace pkb
