// CPU oracle for problem 55: rank r (tp = r % 2, c = r // 2) returns
//   out = D( D(ctx_r w_o_r^T) + D(ctx_p w_o_p^T) ),  p = its TP partner r ^ 1,
// ctx_r = D(causal softmax attention of rank r's queries over the keys and values of the CP ranks
// c' = 0..c of its CP group (world ranks 2 c' + tp), own block masked j <= i, scale Dh^-1/2), and
// q, k, v = the thirds of D(hidden_states w_qkv^T) viewed as [B, S, 3, HL, Dh]. In double, with
// PyTorch's roundings to D emulated (F.linear's outputs, out.to(q.dtype) of the context, the sum of
// two D values, one rounding as NCCL's). PKB's ring and its (out, lse) merges compute exactly this
// softmax, only in fp32. At W = 2 the CP group is one rank (the own block only).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

// Y[m, n] = D(X[m, k] Wt[n, k]^T), row-major.
std::vector<double> linear(pkb::Narrow d, const std::vector<double>& X, const std::vector<double>& Wt, size_t m,
                           size_t n, size_t k) {
  std::vector<double> Y(m * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (size_t t = 0; t < k; ++t) s += X[i * k + t] * Wt[j * k + t];
      Y[i * n + j] = pkb::round_to(d, s);
    }
  return Y;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world, TP = static_cast<int>(io.param("TP")), CP = W / TP;
  const size_t B = io.param("B"), S = io.param("S"), HL = io.param("HL"), Dh = io.param("Dh"), HS = io.param("HS");
  const size_t width = HL * Dh, row = 3 * width;  // one qkv row: [3][HL][Dh]
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  std::vector<std::vector<double>> qkv(W), partial(W);
  for (int r = 0; r < W; ++r) qkv[r] = linear(d, io.inputs[r][0].values, io.inputs[r][1].values, B * S, row, HS);
  std::vector<double> p(CP * S), o(Dh);
  for (int r = 0; r < W; ++r) {
    const int tp = r % TP, c = r / TP;
    std::vector<double> ctx(B * S * width);
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < HL; ++h)
        for (size_t i = 0; i < S; ++i) {
          const double* q = &qkv[r][(b * S + i) * row + h * Dh];
          // keys at global positions c' S + j <= c S + i, held by ranks c' TP + tp
          const size_t n = c * S + i + 1;
          double m = -INFINITY;
          for (size_t g = 0; g < n; ++g) {
            const double* k = &qkv[(g / S) * TP + tp][(b * S + g % S) * row + width + h * Dh];
            double dot = 0.0;
            for (size_t e = 0; e < Dh; ++e) dot += q[e] * k[e];
            p[g] = dot * scale;
            m = std::max(m, p[g]);
          }
          double sum = 0.0;
          for (size_t g = 0; g < n; ++g) sum += (p[g] = std::exp(p[g] - m));
          std::fill(o.begin(), o.end(), 0.0);
          for (size_t g = 0; g < n; ++g) {
            const double* v = &qkv[(g / S) * TP + tp][(b * S + g % S) * row + 2 * width + h * Dh];
            for (size_t e = 0; e < Dh; ++e) o[e] += p[g] * v[e];
          }
          for (size_t e = 0; e < Dh; ++e) ctx[(b * S + i) * width + h * Dh + e] = pkb::round_to(d, o[e] / sum);
        }
    partial[r] = linear(d, ctx, io.inputs[r][2].values, B * S, HS, width);
  }
  for (int r = 0; r < W; ++r) {
    const int first = r - r % TP;  // the TP pair
    std::vector<double>& y = io.outputs[r][0].values;
    for (size_t i = 0; i < y.size(); ++i) {
      double s = 0.0;
      for (int t = first; t < first + TP; ++t) s += partial[t][i];
      y[i] = pkb::round_to(d, s);
    }
  }
}
