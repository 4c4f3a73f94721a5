// CPU oracle for problem 87: rank r's strip padded with rank r-1's last row above (zeros on rank 0)
// and rank r+1's first row below (zeros on the last rank), columns zero-padded, convolved 3 x 3 with
// rank r's weight in double, then PyTorch's two roundings: D(conv), D(that + bias). Costs W C^2 9 Hl X
// multiply-adds: tiny and small only.
#include <vector>

#include "spec/oracle.hpp"

namespace {

// out[o][h][w] = sum over i, ky, kx of wt[o][i][ky][kx] padded[i][h + ky][w + kx - 1] (zero columns at
// w + kx - 1 = -1 and X).
std::vector<double> conv(const std::vector<double>& padded, const std::vector<double>& wt, size_t C, size_t Hl,
                         size_t X) {
  std::vector<double> out(C * Hl * X, 0.0);
  for (size_t o = 0; o < C; ++o)
    for (size_t i = 0; i < C; ++i)
      for (size_t ky = 0; ky < 3; ++ky)
        for (size_t kx = 0; kx < 3; ++kx) {
          double wv = wt[((o * C + i) * 3 + ky) * 3 + kx];
          for (size_t h = 0; h < Hl; ++h) {
            const double* pr = &padded[(i * (Hl + 2) + h + ky) * X];
            double* orow = &out[(o * Hl + h) * X];
            size_t w0 = kx == 0 ? 1 : 0, w1 = kx == 2 ? X - 1 : X;  // columns whose tap is inside
            for (size_t w = w0; w < w1; ++w) orow[w] += wv * pr[w + kx - 1];
          }
        }
  return out;
}

}  // namespace

PKB_ORACLE(io) {
  const size_t C = io.param("C"), Hl = io.param("Hl"), X = io.param("X");
  const int W = io.world;
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][2].values);  // bias is drawn in D from a normal
  for (int r = 0; r < W; ++r) {
    std::vector<double> padded(C * (Hl + 2) * X, 0.0);
    for (size_t i = 0; i < C; ++i) {
      double* p = &padded[i * (Hl + 2) * X];
      const double* own = &io.inputs[r][0].values[i * Hl * X];
      for (size_t k = 0; k < Hl * X; ++k) p[X + k] = own[k];
      if (r > 0) {  // rank r-1's last row
        const double* prev = &io.inputs[r - 1][0].values[(i * Hl + Hl - 1) * X];
        for (size_t w = 0; w < X; ++w) p[w] = prev[w];
      }
      if (r < W - 1) {  // rank r+1's first row
        const double* next = &io.inputs[r + 1][0].values[i * Hl * X];
        for (size_t w = 0; w < X; ++w) p[(Hl + 1) * X + w] = next[w];
      }
    }
    std::vector<double> y = conv(padded, io.inputs[r][1].values, C, Hl, X);
    const std::vector<double>& bias = io.inputs[r][2].values;
    std::vector<double>& out = io.outputs[r][0].values;
    for (size_t k = 0; k < y.size(); ++k) out[k] = pkb::round_to(d, pkb::round_to(d, y[k]) + bias[k / (Hl * X)]);
  }
}
