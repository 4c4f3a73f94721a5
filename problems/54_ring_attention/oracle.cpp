// CPU oracle for problem 54: causal attention over the whole (contiguously split) sequence, in
// double. Rank r's query i attends to every key of ranks 0..r-1 and to keys j <= i of its own block;
// PKB's ring with its (out, lse) merges computes exactly this softmax, only in fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const auto& sh = io.inputs[0][0].shape;  // [B, S, H, Dh]
  const long long B = sh[0], S = sh[1], H = sh[2], Dh = sh[3];
  const int W = io.world;
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  auto at = [&](long long b, long long s, long long h) { return ((b * S + s) * H + h) * Dh; };
  // Per (b, h): every rank's keys and values in sequence order, contiguous [W S][Dh].
  std::vector<double> k(W * S * Dh), v(W * S * Dh), p(W * S), o(Dh);
  for (long long b = 0; b < B; ++b)
    for (long long h = 0; h < H; ++h) {
      for (int r = 0; r < W; ++r)
        for (long long j = 0; j < S; ++j) {
          std::copy_n(&io.inputs[r][1].values[at(b, j, h)], Dh, &k[(r * S + j) * Dh]);
          std::copy_n(&io.inputs[r][2].values[at(b, j, h)], Dh, &v[(r * S + j) * Dh]);
        }
      for (int r = 0; r < W; ++r)
        for (long long i = 0; i < S; ++i) {
          const double* q = &io.inputs[r][0].values[at(b, i, h)];
          long long n = r * S + i + 1;  // keys at or before global position r S + i
          double m = -INFINITY;
          for (long long j = 0; j < n; ++j) {
            double dot = 0.0;
            for (long long e = 0; e < Dh; ++e) dot += q[e] * k[j * Dh + e];
            p[j] = dot * scale;
            m = std::max(m, p[j]);
          }
          double sum = 0.0;
          for (long long j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - m));
          std::fill(o.begin(), o.end(), 0.0);
          for (long long j = 0; j < n; ++j)
            for (long long e = 0; e < Dh; ++e) o[e] += p[j] * v[j * Dh + e];
          double* out = &io.outputs[r][0].values[at(b, i, h)];
          for (long long e = 0; e < Dh; ++e) out[e] = o[e] / sum;
        }
    }
}
