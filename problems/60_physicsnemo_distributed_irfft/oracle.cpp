// CPU oracle for problem 60: for every field, the full H x Wd spectrum P that PKB builds from the
// ranks' row slabs of the half spectrum (P[h, c] = S[h, c] for c < K, conj(S[(H - h) mod H, Wd - c])
// for c >= K), its inverse 2-D DFT with ortho scaling in double, and the real part, split into the
// ranks' column slabs. The DFTs are mixed radix (decimation in time over the prime factors of the
// length, a direct sum for each prime), with twiddles taken from one table of exact angles.
#include <cmath>
#include <complex>
#include <vector>

#include "spec/oracle.hpp"

namespace {

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

/// An inverse DFT X[k] = sum_j x[j] exp(+2 pi i j k / n) of one length n (unnormalised).
class InverseDft {
 public:
  explicit InverseDft(size_t n) : n_(n), roots_(n) {
    for (size_t j = 0; j < n; ++j) roots_[j] = std::polar(1.0, 2.0 * kPi * static_cast<double>(j) / static_cast<double>(n));
    for (size_t m = n, p = 2; m > 1;) {
      if (p * p > m) p = m;  // what is left is prime
      if (m % p == 0) {
        factors_.push_back(p);
        m /= p;
      } else {
        ++p;
      }
    }
  }

  /// out[k] = sum_j in[j * stride] exp(+2 pi i j k / n); `out` holds n values and must not alias `in`.
  void run(const cd* in, size_t stride, cd* out) const { step(in, stride, out, n_, 0); }

 private:
  /// exp(+2 pi i e / len) for a length len that divides n.
  cd root(size_t e, size_t len) const { return roots_[(e % len) * (n_ / len)]; }

  // One level: the p sub-transforms of length m = len / p over the inputs q, q + p, q + 2p, ...
  // (each written to out[q m .. q m + m - 1]), then X[k + m s] = sum_q w_len^(q k) w_p^(q s) Y_q[k].
  void step(const cd* in, size_t stride, cd* out, size_t len, size_t level) const {
    if (len == 1) {
      out[0] = in[0];
      return;
    }
    const size_t p = factors_[level], m = len / p;
    for (size_t q = 0; q < p; ++q) step(in + q * stride, stride * p, out + q * m, m, level + 1);
    std::vector<cd> t(p);
    for (size_t k = 0; k < m; ++k) {
      for (size_t q = 0; q < p; ++q) t[q] = out[q * m + k] * root(q * k, len);
      for (size_t s = 0; s < p; ++s) {
        cd acc(0.0, 0.0);
        for (size_t q = 0; q < p; ++q) acc += t[q] * root(q * s, p);
        out[k + m * s] = acc;
      }
    }
  }

  size_t n_;
  std::vector<cd> roots_;
  std::vector<size_t> factors_;
};

}  // namespace

PKB_ORACLE(io) {
  const long long BC = io.param("B") * io.param("C"), H = io.param("H"), Wd = io.param("Wd");
  const long long Hl = io.param("Hl"), Wl = io.param("Wl"), K = io.param("K");
  const InverseDft along_w(static_cast<size_t>(Wd)), along_h(static_cast<size_t>(H));
  const double scale = 1.0 / std::sqrt(static_cast<double>(H) * static_cast<double>(Wd));
  std::vector<cd> padded(static_cast<size_t>(Wd)), rows(static_cast<size_t>(H * Wd));
  std::vector<cd> column(static_cast<size_t>(H));
  // S[f][h][k] of field f: rank h / Hl's row h % Hl, as (re, im) pairs.
  auto spectrum = [&](long long f, long long h, long long k) {
    const std::vector<double>& x = io.inputs[h / Hl][0].values;  // [B C][Hl][K][2]
    const size_t at = static_cast<size_t>(((f * Hl + h % Hl) * K + k) * 2);
    return cd(x[at], x[at + 1]);
  };
  for (long long f = 0; f < BC; ++f) {
    // 1. Row h of P, then its inverse DFT along Wd: rows[h][m].
    for (long long h = 0; h < H; ++h) {
      for (long long c = 0; c < Wd; ++c)
        padded[c] = c < K ? spectrum(f, h, c) : std::conj(spectrum(f, (H - h) % H, Wd - c));
      along_w.run(padded.data(), 1, rows.data() + h * Wd);
    }
    // 2. Inverse DFT along H of every column m; column m belongs to rank m / Wl.
    for (long long m = 0; m < Wd; ++m) {
      along_h.run(rows.data() + m, static_cast<size_t>(Wd), column.data());
      std::vector<double>& y = io.outputs[m / Wl][0].values;  // [B C][H][Wl]
      for (long long n = 0; n < H; ++n) y[static_cast<size_t>((f * H + n) * Wl + m % Wl)] = column[n].real() * scale;
    }
  }
}
