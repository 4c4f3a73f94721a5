// CPU oracle for problem 13: every rank gets C = sum over ranks r of A_local[r] B_local[r], exactly (in
// double; the tolerance in spec.toml covers the bf16 roundings of the partial products and sums).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const size_t M = io.param("M"), N = io.param("N"), K = io.param("K");
  std::vector<double> C(M * N, 0.0);
  for (int r = 0; r < io.world; ++r) {
    const std::vector<double>& A = io.inputs[r][0].values;
    const std::vector<double>& B = io.inputs[r][1].values;
    for (size_t m = 0; m < M; ++m)
      for (size_t k = 0; k < K; ++k) {
        double a = A[m * K + k];
        const double* b = &B[k * N];
        double* c = &C[m * N];
        for (size_t n = 0; n < N; ++n) c[n] += a * b[n];
      }
  }
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = C;
}
