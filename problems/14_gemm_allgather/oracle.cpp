// CPU oracle for problem 14: every rank gets C = [A_0 B_0 | ... | A_{W-1} B_{W-1}] (M x N), column block
// s being rank s's own product, in double (one rounding to D on the GPU, covered by the tolerance).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), N = io.param("N"), K = io.param("K"), Nl = N / W;
  std::vector<double> C(M * N, 0.0);
  for (int s = 0; s < W; ++s) {
    const std::vector<double>& A = io.inputs[s][0].values;  // [M, K]
    const std::vector<double>& B = io.inputs[s][1].values;  // [K, Nl]
    for (size_t m = 0; m < M; ++m)
      for (size_t k = 0; k < K; ++k) {
        const double a = A[m * K + k];
        const double* b = &B[k * Nl];
        double* c = &C[m * N + s * Nl];
        for (size_t n = 0; n < Nl; ++n) c[n] += a * b[n];
      }
  }
  for (int r = 0; r < W; ++r) io.outputs[r][0].values = C;
}
