// CPU oracle for problem 66: on rank r, received chunk c (P rows) is chunk k = (W - c) mod W of
// grad_output on rank j = (r + c) mod W (PKB's rank-rotated split lists, as in problem 65); the
// output sums received row q into row seed_inverse_ids[q] (PKB's sparse.mm with a 0/1 COO matrix).
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long P = io.param("P"), F = io.param("F");
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;        // [Ns, F], zeroed by the harness
    const std::vector<double>& ids = io.inputs[r][1].values;   // [R], this rank's
    for (long long c = 0; c < W; ++c) {
      const long long j = (r + c) % W, k = (W - c) % W;
      const std::vector<double>& grad = io.inputs[j][0].values;  // [R, F], rank j's
      for (long long i = 0; i < P; ++i) {
        const long long q = c * P + i;  // row of the received tensor
        const long long row = static_cast<long long>(ids[q]);
        for (long long f = 0; f < F; ++f) out[row * F + f] += grad[(k * P + i) * F + f];
      }
    }
  }
}
