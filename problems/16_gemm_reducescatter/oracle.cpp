// CPU oracle for problem 16: rank r gets rows [r M/W, (r+1) M/W) of sum over ranks s of
// A_local[s] B_local[s], exactly (in double; the tolerance in spec.toml covers the bf16 roundings of
// the partial products and sums).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), N = io.param("N"), Kl = io.param("K") / W, Ml = M / W;
  for (int r = 0; r < W; ++r) {
    std::vector<double>& C = io.outputs[r][0].values;  // [M/W, N]
    for (int s = 0; s < W; ++s) {
      const std::vector<double>& A = io.inputs[s][0].values;  // [M, K/W]
      const std::vector<double>& B = io.inputs[s][1].values;  // [K/W, N]
      for (size_t m = 0; m < Ml; ++m)
        for (size_t k = 0; k < Kl; ++k) {
          double a = A[(r * Ml + m) * Kl + k];
          const double* b = &B[k * N];
          double* c = &C[m * N];
          for (size_t n = 0; n < N; ++n) c[n] += a * b[n];
        }
    }
  }
}
