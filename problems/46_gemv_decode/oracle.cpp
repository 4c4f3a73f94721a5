// CPU oracle for problem 46: every rank gets logits [T, W V] whose columns [s V, (s+1) V) are
// D(x w_s^T) + b_s, with x the shared hidden states and w_s, b_s rank s's weight and bias slices. In
// double, except that the product is rounded to D before the bias is added, as PyTorch's two ops do;
// the final rounding is covered by the tolerance.
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t T = io.param("T"), H = io.param("H"), V = io.param("V"), cols = (size_t)W * V;
  const std::vector<double>& x = io.inputs[0][0].values;  // [T, H], shared
  const pkb::Narrow d = pkb::infer_narrow(io, x);
  std::vector<double> logits(T * cols);
  for (int s = 0; s < W; ++s) {
    const std::vector<double>& w = io.inputs[s][1].values;  // [V, H]
    const std::vector<double>& b = io.inputs[s][2].values;  // [V]
    for (size_t t = 0; t < T; ++t)
      for (size_t v = 0; v < V; ++v) {
        double p = 0.0;
        for (size_t k = 0; k < H; ++k) p += x[t * H + k] * w[v * H + k];
        logits[t * cols + s * V + v] = pkb::round_to(d, p) + b[v];
      }
  }
  for (int r = 0; r < W; ++r) io.outputs[r][0].values = logits;
}
