// CPU oracle for problem 33: out[i, j N + n] = x_j[rank M/W + i, n] on rank `rank`.
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long M = io.param("M"), N = io.param("N");
  const long long Ml = M / W;
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [M/W, W N]
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [M, N]
      for (long long i = 0; i < Ml; ++i)
        for (long long n = 0; n < N; ++n) out[(i * W + j) * N + n] = x[(r * Ml + i) * N + n];
    }
  }
}
