// CPU oracle for problem 24, per rank in double with PyTorch's roundings to D emulated where they
// are visible: x = D(logit + bias); p = D(softmax(x)); top-2 of p per token (strict >, so ties go to
// the lower expert index, as the baseline); f[k][e] = count / M; P[e] = D(mean of p); loss = E sum
// f P. The output is the mean of the ranks' losses. Oracles are not told D: e = 4 is fp32; for e = 2
// it is bf16 when every value of rank 0's logits is a bf16 value, else fp16.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), E = io.param("E"), K = io.param("K");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  double total = 0.0;
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& logits = io.inputs[r][0].values;
    const std::vector<double>& bias = io.inputs[r][1].values;
    std::vector<double> counts(K * E, 0.0), prob_sums(E, 0.0), x(E), p(E);
    for (size_t t = 0; t < M; ++t) {
      double m = -INFINITY;
      for (size_t e = 0; e < E; ++e) {
        x[e] = pkb::round_to(d, logits[t * E + e] + bias[e]);
        m = std::max(m, x[e]);
      }
      double sum = 0.0;
      for (size_t e = 0; e < E; ++e) sum += std::exp(x[e] - m);
      for (size_t e = 0; e < E; ++e) {
        p[e] = pkb::round_to(d, std::exp(x[e] - m) / sum);
        prob_sums[e] += p[e];
      }
      std::vector<bool> taken(E, false);
      for (size_t k = 0; k < K; ++k) {
        size_t best = E;
        for (size_t e = 0; e < E; ++e)
          if (!taken[e] && (best == E || p[e] > p[best])) best = e;
        taken[best] = true;
        counts[k * E + best] += 1.0;
      }
    }
    double loss = 0.0;
    for (size_t e = 0; e < E; ++e) {
      const double P = pkb::round_to(d, prob_sums[e] / static_cast<double>(M));
      for (size_t k = 0; k < K; ++k) loss += counts[k * E + e] / static_cast<double>(M) * P;
    }
    total += static_cast<double>(E) * loss;
  }
  for (int r = 0; r < W; ++r) io.outputs[r][0].values[0] = total / W;
}
