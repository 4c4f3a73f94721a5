// CPU oracle for problem 54: causal attention over the whole (contiguously split) sequence, in
// double. Rank r's query i attends to every key of ranks 0..r-1 and to keys j <= i of its own block;
// PKB's ring with its (out, lse) merges computes exactly this softmax, only in fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const auto& sh = io.inputs[0][0].shape;  // [B, S, H, Dh]
  long long B = sh[0], S = sh[1], H = sh[2], Dh = sh[3];
  double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  auto at = [&](long long b, long long s, long long h) { return ((b * S + s) * H + h) * Dh; };
  std::vector<double> scores;
  for (int r = 0; r < io.world; ++r) {
    const std::vector<double>& q = io.inputs[r][0].values;
    std::vector<double>& out = io.outputs[r][0].values;
    for (long long b = 0; b < B; ++b)
      for (long long h = 0; h < H; ++h)
        for (long long i = 0; i < S; ++i) {
          // Keys in global order: block src = 0..r, position j (j <= i on the diagonal block).
          scores.clear();
          double m = -INFINITY;
          for (int src = 0; src <= r; ++src) {
            const std::vector<double>& k = io.inputs[src][1].values;
            long long jn = src == r ? i + 1 : S;
            for (long long j = 0; j < jn; ++j) {
              double dot = 0.0;
              for (long long e = 0; e < Dh; ++e) dot += q[at(b, i, h) + e] * k[at(b, j, h) + e];
              scores.push_back(dot * scale);
              m = std::max(m, scores.back());
            }
          }
          double sum = 0.0;
          for (double& x : scores) sum += (x = std::exp(x - m));
          double* o = &out[at(b, i, h)];
          std::fill(o, o + Dh, 0.0);
          size_t idx = 0;
          for (int src = 0; src <= r; ++src) {
            const std::vector<double>& v = io.inputs[src][2].values;
            long long jn = src == r ? i + 1 : S;
            for (long long j = 0; j < jn; ++j, ++idx) {
              double p = scores[idx] / sum;
              for (long long e = 0; e < Dh; ++e) o[e] += p * v[at(b, j, h) + e];
            }
          }
        }
  }
}
