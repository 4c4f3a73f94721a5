// CPU oracle for problem 26: c_j[e] = the sum of rank j's expert_mask[e] over slots and tokens;
// rank r owns experts r L .. r L + L - 1. Rank r: input_splits[j] = sum of c_r over rank j's experts,
// output_splits[i] = sum of c_i over rank r's experts, per_local[i][l] = c_i[r L + l],
// sum_local[l] = sum over i of c_i[r L + l]. Integers throughout (exact in double).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long E = io.param("E"), L = io.param("L");
  std::vector<std::vector<double>> counts(W, std::vector<double>(E, 0.0));
  for (int j = 0; j < W; ++j) {
    const std::vector<double>& mask = io.inputs[j][0].values;  // [E, K, M]
    const size_t per_expert = mask.size() / static_cast<size_t>(E);
    for (long long e = 0; e < E; ++e)
      for (size_t t = 0; t < per_expert; ++t) counts[j][e] += mask[e * per_expert + t];
  }
  for (int r = 0; r < W; ++r) {
    auto& out = io.outputs[r];
    for (int j = 0; j < W; ++j)
      for (long long l = 0; l < L; ++l) {
        out[0].values[j] += counts[r][j * L + l];  // input_splits
        out[1].values[j] += counts[j][r * L + l];  // output_splits
        out[2].values[j * L + l] = counts[j][r * L + l];
        out[3].values[l] += counts[j][r * L + l];
      }
  }
}
