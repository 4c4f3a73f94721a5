// CPU oracle for problem 11: C[r] = A B[r], where A (M x K) concatenates every rank's A_local along
// its columns (rank s holds columns [s K/W, (s+1) K/W), i.e. rows [s K/W, (s+1) K/W) of PKB's
// gathered A^T) and B[r] is rank r's own B. The transposes are layout only, so this is problem 12's
// product; the output is C row-major (PKB's transposed view of C^T, made contiguous).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), N = io.param("N"), K = io.param("K"), Kl = K / W;
  std::vector<double> A(M * K);  // row-major [M, K]
  for (int s = 0; s < W; ++s)
    for (size_t m = 0; m < M; ++m)
      for (size_t k = 0; k < Kl; ++k) A[m * K + s * Kl + k] = io.inputs[s][0].values[m * Kl + k];
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& B = io.inputs[r][1].values;
    std::vector<double>& C = io.outputs[r][0].values;
    for (size_t m = 0; m < M; ++m)
      for (size_t k = 0; k < K; ++k) {
        const double a = A[m * K + k];
        const double* b = &B[k * N];
        double* c = &C[m * N];
        for (size_t n = 0; n < N; ++n) c[n] += a * b[n];
      }
  }
}
