// CPU oracle for problem 56: with CP = W / 2 and a stage block
//   block_s(x_0..x_{CP-1})_c = D(ctx_c w_o_s^T),
//   ctx_c = D(causal softmax attention of q_c over the keys and values of c' = 0..c, own block masked
//           j <= i, scale Dh^-1/2),  q, k, v = the thirds of D(x_c w_qkv_s^T) viewed as [B, S, 3, H, Dh],
// rank c (stage 0) returns y0_c = block_0(hidden_states of ranks 0..CP-1)_c and rank CP + c (stage 1)
// returns block_1(y0_0..y0_{CP-1})_c: stage 1 reads stage 0's D outputs, never its own hidden_states.
// In double, with PyTorch's roundings to D emulated (F.linear's outputs and out.to(q.dtype) of the
// context). PKB's ring and its (out, lse) merges compute exactly this softmax, only in fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

using Mat = std::vector<double>;

// Y[m, n] = D(X[m, k] Wt[n, k]^T), row-major.
Mat linear(pkb::Narrow d, const Mat& X, const Mat& Wt, size_t m, size_t n, size_t k) {
  Mat Y(m * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (size_t t = 0; t < k; ++t) s += X[i * k + t] * Wt[j * k + t];
      Y[i * n + j] = pkb::round_to(d, s);
    }
  return Y;
}

// One stage over its CP ranks: inputs x[c] [B S, HS], the stage's weights; returns y[c] [B S, HS].
std::vector<Mat> block(const pkb::OracleIO& io, pkb::Narrow d, const std::vector<Mat>& x, const Mat& w_qkv,
                       const Mat& w_o) {
  const size_t B = io.param("B"), S = io.param("S"), H = io.param("H"), Dh = io.param("Dh"), HS = io.param("HS");
  const size_t CP = x.size(), width = H * Dh, row = 3 * width;
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  std::vector<Mat> qkv(CP), y(CP);
  for (size_t c = 0; c < CP; ++c) qkv[c] = linear(d, x[c], w_qkv, B * S, row, HS);
  Mat p(CP * S), o(Dh);
  for (size_t c = 0; c < CP; ++c) {
    Mat ctx(B * S * width);
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < S; ++i) {
          const double* q = &qkv[c][(b * S + i) * row + h * Dh];
          const size_t n = c * S + i + 1;  // keys at global positions <= c S + i
          double m = -INFINITY;
          for (size_t g = 0; g < n; ++g) {
            const double* k = &qkv[g / S][(b * S + g % S) * row + width + h * Dh];
            double dot = 0.0;
            for (size_t e = 0; e < Dh; ++e) dot += q[e] * k[e];
            p[g] = dot * scale;
            m = std::max(m, p[g]);
          }
          double sum = 0.0;
          for (size_t g = 0; g < n; ++g) sum += (p[g] = std::exp(p[g] - m));
          std::fill(o.begin(), o.end(), 0.0);
          for (size_t g = 0; g < n; ++g) {
            const double* v = &qkv[g / S][(b * S + g % S) * row + 2 * width + h * Dh];
            for (size_t e = 0; e < Dh; ++e) o[e] += p[g] * v[e];
          }
          for (size_t e = 0; e < Dh; ++e) ctx[(b * S + i) * width + h * Dh + e] = pkb::round_to(d, o[e] / sum);
        }
    y[c] = linear(d, ctx, w_o, B * S, HS, width);
  }
  return y;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world, CP = W / 2;
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  // Stage s's weights are equal on its ranks s CP .. s CP + CP - 1; take its first rank's.
  std::vector<Mat> x0(CP);
  for (int c = 0; c < CP; ++c) x0[c] = io.inputs[c][0].values;
  const std::vector<Mat> y0 = block(io, d, x0, io.inputs[0][1].values, io.inputs[0][2].values);
  const std::vector<Mat> y1 = block(io, d, y0, io.inputs[CP][1].values, io.inputs[CP][2].values);
  for (int c = 0; c < CP; ++c) {
    io.outputs[c][0].values = y0[c];
    io.outputs[CP + c][0].values = y1[c];
  }
}
