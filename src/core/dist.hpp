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
};

/// One distribution, trivially copyable so that it can be passed to kernels.
struct Dist {
  DistKind kind = DistKind::normal;
  double a = 0.0;
  double b = 1.0;
  int64_t lo = 0;
  int64_t hi = 0;
};

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
    case DistKind::zeros: return 0.0f;
    case DistKind::ones: return 1.0f;
    case DistKind::arange: return 0.0f;  // handled by the caller, which knows the index
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

}  // namespace pkb
