// CPU oracle for problem 59: the ortho 2-D DFT of the global field (the ranks' column slabs side by
// side), rows split over the ranks, the first Wd/2 + 1 columns kept, complex as (re, im) pairs.
// The DFTs are done in double: radix 2 for powers of two, otherwise Bluestein's chirp-z transform
// through a power-of-two convolution (H and Wd are rounded up to a multiple of W, so W = 3, 5, 6, 7
// give other lengths).
#include <cmath>
#include <complex>
#include <utility>
#include <vector>

#include "spec/oracle.hpp"

namespace {

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

/// A forward DFT X[k] = sum_j x[j] exp(-2 pi i j k / n) of one length n (unnormalised).
class Dft {
 public:
  explicit Dft(size_t n) : n_(n) {
    if (is_pow2(n)) {
      roots_ = roots(n);
      return;
    }
    // Bluestein: X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]) with c[j] = exp(-i pi j^2 / n); the sum is
    // a linear convolution, done as a cyclic one of length m >= 2n - 1. j^2 is reduced mod 2n in
    // integers so the chirp's angle stays exact for every n.
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    roots_ = roots(m_);
    chirp_.resize(n);
    for (size_t j = 0; j < n; ++j) {
      unsigned long long q = (static_cast<unsigned long long>(j) * j) % (2ull * n);
      chirp_[j] = std::polar(1.0, -kPi * static_cast<double>(q) / static_cast<double>(n));
    }
    kernel_.assign(m_, cd(0.0, 0.0));
    for (size_t j = 0; j < n; ++j) {
      kernel_[j] = std::conj(chirp_[j]);
      if (j) kernel_[m_ - j] = std::conj(chirp_[j]);
    }
    fft_pow2(kernel_, roots_);
  }

  /// Transforms `a` (length n) in place.
  void forward(std::vector<cd>& a) const {
    if (chirp_.empty()) {
      fft_pow2(a, roots_);
      return;
    }
    std::vector<cd> t(m_, cd(0.0, 0.0));
    for (size_t j = 0; j < n_; ++j) t[j] = a[j] * chirp_[j];
    fft_pow2(t, roots_);
    for (size_t k = 0; k < m_; ++k) t[k] *= kernel_[k];
    // Inverse through the forward transform: ifft(t) = conj(fft(conj(t))) / m.
    for (cd& v : t) v = std::conj(v);
    fft_pow2(t, roots_);
    for (size_t k = 0; k < n_; ++k) a[k] = chirp_[k] * std::conj(t[k]) / static_cast<double>(m_);
  }

 private:
  static bool is_pow2(size_t n) { return n && !(n & (n - 1)); }

  /// exp(-2 pi i k / n) for k < n / 2, each from its own angle.
  static std::vector<cd> roots(size_t n) {
    std::vector<cd> w(n / 2);
    for (size_t k = 0; k < n / 2; ++k) w[k] = std::polar(1.0, -2.0 * kPi * static_cast<double>(k) / static_cast<double>(n));
    return w;
  }

  /// Iterative radix-2 decimation in time; `w` holds the roots of a's length.
  static void fft_pow2(std::vector<cd>& a, const std::vector<cd>& w) {
    const size_t n = a.size();
    for (size_t i = 1, j = 0; i < n; ++i) {
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1) {
      const size_t step = n / len;
      for (size_t i = 0; i < n; i += len)
        for (size_t k = 0; k < len / 2; ++k) {
          cd u = a[i + k], v = a[i + k + len / 2] * w[k * step];
          a[i + k] = u + v;
          a[i + k + len / 2] = u - v;
        }
    }
  }

  size_t n_, m_ = 0;
  std::vector<cd> roots_, chirp_, kernel_;
};

}  // namespace

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long B = io.param("B"), H = io.param("H"), Wd = io.param("Wd");
  const long long Hl = io.param("Hl"), Wl = io.param("Wl"), K = io.param("K");
  const Dft along_h(static_cast<size_t>(H)), along_w(static_cast<size_t>(Wd));
  const double scale_h = 1.0 / std::sqrt(static_cast<double>(H)), scale_w = 1.0 / std::sqrt(static_cast<double>(Wd));
  std::vector<cd> spectrum(static_cast<size_t>(H * Wd));  // one field after the FFT along H, [H][Wd]
  std::vector<cd> line;
  for (long long b = 0; b < B; ++b) {
    // 1. FFT along H of every global column c = j Wl + w (rank j's column w).
    line.resize(static_cast<size_t>(H));
    for (long long j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [B, H, Wl]
      for (long long w = 0; w < Wl; ++w) {
        for (long long h = 0; h < H; ++h) line[h] = cd(x[(b * H + h) * Wl + w], 0.0);
        along_h.forward(line);
        for (long long h = 0; h < H; ++h) spectrum[h * Wd + j * Wl + w] = line[h] * scale_h;
      }
    }
    // 2. FFT along Wd of every row; row h goes to rank h / Hl, which keeps bins 0 .. K - 1.
    line.resize(static_cast<size_t>(Wd));
    for (long long h = 0; h < H; ++h) {
      for (long long c = 0; c < Wd; ++c) line[c] = spectrum[h * Wd + c];
      along_w.forward(line);
      std::vector<double>& y = io.outputs[h / Hl][0].values;  // [B, Hl, K, 2]
      const long long row = b * Hl + h % Hl;
      for (long long k = 0; k < K; ++k) {
        y[(row * K + k) * 2] = line[k].real() * scale_w;
        y[(row * K + k) * 2 + 1] = line[k].imag() * scale_w;
      }
    }
  }
}
