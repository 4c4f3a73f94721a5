// CPU oracle for problem 48: rank r (tp = r % TP, fs = r // TP) returns
//   y = D( sum over its TP group t' of D( z_t' W3_t' ) ),  z_t = D( D(SiLU(D(x W1_t))) D(x W2_t) ),
// x = its own x_local (the same for the pair), W1_t / W2_t = the W1_shard / W2_shard of the FSDP
// group of tp_rank t (ranks s TP + t, s = 0..FS-1) stacked along rows, W3_t = their W3_shard placed
// side by side along columns. In double, with every rounding to D that PyTorch makes emulated (the
// GEMM outputs, F.silu, the product, the partial y); the TP sum of at most two D values is one
// rounding, as NCCL's. At TP = 1 the sum is the partial itself.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

// The rank's partial D(z W3_t), row-major [BF, H].
std::vector<double> partial(const pkb::OracleIO& io, pkb::Narrow d, int r) {
  const size_t TP = io.param("TP"), FS = io.param("FS"), H = io.param("H"), F = io.param("F");
  const size_t BF = io.param("BF"), Fl = F / TP, Hl = H / FS, t = r % TP;
  const std::vector<double>& x = io.inputs[r][0].values;  // [BF, H]
  std::vector<double> W1(H * Fl), W2(H * Fl), W3(Fl * H);   // the gathered slabs
  for (size_t s = 0; s < FS; ++s) {
    const auto& in = io.inputs[s * TP + t];
    for (size_t i = 0; i < Hl * Fl; ++i) {
      W1[s * Hl * Fl + i] = in[1].values[i];
      W2[s * Hl * Fl + i] = in[2].values[i];
    }
    for (size_t f = 0; f < Fl; ++f)
      for (size_t j = 0; j < Hl; ++j) W3[f * H + s * Hl + j] = in[3].values[f * Hl + j];
  }
  std::vector<double> y(BF * H, 0.0), a(Fl), b(Fl);
  for (size_t m = 0; m < BF; ++m) {
    std::fill(a.begin(), a.end(), 0.0);
    std::fill(b.begin(), b.end(), 0.0);
    for (size_t k = 0; k < H; ++k) {
      const double xv = x[m * H + k];
      for (size_t f = 0; f < Fl; ++f) {
        a[f] += xv * W1[k * Fl + f];
        b[f] += xv * W2[k * Fl + f];
      }
    }
    for (size_t f = 0; f < Fl; ++f) {
      const double h = pkb::round_to(d, a[f]);
      const double silu = pkb::round_to(d, h / (1.0 + std::exp(-h)));
      a[f] = pkb::round_to(d, silu * pkb::round_to(d, b[f]));
    }
    double* yr = &y[m * H];
    for (size_t f = 0; f < Fl; ++f)
      for (size_t n = 0; n < H; ++n) yr[n] += a[f] * W3[f * H + n];
    for (size_t n = 0; n < H; ++n) yr[n] = pkb::round_to(d, yr[n]);
  }
  return y;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world, TP = static_cast<int>(io.param("TP"));
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  std::vector<std::vector<double>> parts(W);
  for (int r = 0; r < W; ++r) parts[r] = partial(io, d, r);
  for (int r = 0; r < W; ++r) {
    const int first = r - r % TP;  // the TP group: ranks first .. first + TP - 1
    std::vector<double>& y = io.outputs[r][0].values;
    for (size_t i = 0; i < y.size(); ++i) {
      double s = 0.0;
      for (int p = first; p < first + TP; ++p) s += parts[p][i];
      y[i] = TP > 1 ? pkb::round_to(d, s) : s;
    }
  }
}
