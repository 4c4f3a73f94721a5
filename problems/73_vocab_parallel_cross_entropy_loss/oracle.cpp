// CPU oracle for problem 73: loss[t] = log(sum over the whole vocabulary of exp(logit - max)) -
// (logit[target] - max), in double, the same on every rank. The baseline's roundings to D (shifted
// logits, exp, partial sums, log) are not emulated: their effect stays within the bf16 tolerance
// (see spec.toml).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const auto& shape = io.inputs[0][0].shape;  // [B, T, V / W]
  size_t rows = static_cast<size_t>(shape[0] * shape[1]);
  size_t cols = static_cast<size_t>(shape[2]);
  const std::vector<double>& target = io.inputs[0][1].values;
  std::vector<double> loss(rows);
  for (size_t row = 0; row < rows; ++row) {
    double m = -INFINITY;
    for (int r = 0; r < io.world; ++r)
      for (size_t c = 0; c < cols; ++c) m = std::max(m, io.inputs[r][0].values[row * cols + c]);
    double sum = 0.0;
    for (int r = 0; r < io.world; ++r)
      for (size_t c = 0; c < cols; ++c) sum += std::exp(io.inputs[r][0].values[row * cols + c] - m);
    size_t t = static_cast<size_t>(target[row]);
    double logit = io.inputs[t / cols][0].values[row * cols + t % cols];
    loss[row] = std::log(sum) - (logit - m);
  }
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = loss;
}
