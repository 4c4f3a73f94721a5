// CPU oracle for problem 77: non-causal GQA attention range by range, in double. Range i's sequence
// is every rank's tokens i spb .. i spb + spb - 1, rank-major (position s spb + t is rank s's token
// i spb + t); its keys are positions 0 .. C-1. Every query of the range (padded positions >= C
// included) attends to those C keys; query head h reads kv head h // G. PKB's all-to-alls and
// re-orders only move these values around, so this is what its solution() returns (in bf16).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long R = io.param("R"), C = io.param("C"), spb = io.param("spb");
  const long long Hq = io.param("Hq"), Hkv = io.param("Hkv"), Dh = io.param("Dh");
  const long long G = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  std::vector<double> k(C * Dh), v(C * Dh), p(C), o(Dh);
  for (long long i = 0; i < R; ++i)
    for (long long hk = 0; hk < Hkv; ++hk) {
      // The range's C keys and values of kv head hk, in sequence order.
      for (long long j = 0; j < C; ++j) {
        const long long s = j / spb, tok = i * spb + j % spb;
        const double* kv = &io.inputs[s][1].values[(tok * Hkv + hk) * 2 * Dh];
        std::copy_n(kv, Dh, &k[j * Dh]);
        std::copy_n(kv + Dh, Dh, &v[j * Dh]);
      }
      for (int s = 0; s < W; ++s)
        for (long long t = 0; t < spb; ++t)
          for (long long h = hk * G; h < (hk + 1) * G; ++h) {
            const long long tok = i * spb + t;
            const double* q = &io.inputs[s][0].values[(tok * Hq + h) * Dh];
            double m = -INFINITY;
            for (long long j = 0; j < C; ++j) {
              double dot = 0.0;
              for (long long e = 0; e < Dh; ++e) dot += q[e] * k[j * Dh + e];
              p[j] = dot * scale;
              m = std::max(m, p[j]);
            }
            double sum = 0.0;
            for (long long j = 0; j < C; ++j) sum += (p[j] = std::exp(p[j] - m));
            std::fill(o.begin(), o.end(), 0.0);
            for (long long j = 0; j < C; ++j)
              for (long long e = 0; e < Dh; ++e) o[e] += p[j] * v[j * Dh + e];
            double* out = &io.outputs[s][0].values[(tok * Hq + h) * Dh];
            for (long long e = 0; e < Dh; ++e) out[e] = o[e] / sum;
          }
    }
}
