// CPU oracle for problem 65: on rank r, output chunk c (P rows) is chunk k = (W - c) mod W of
// local_features[seed_inverse_ids] on rank j = (r + c) mod W. (PKB rotates both split lists by
// rank: rank j sends its chunk (r - j) mod W to rank r, which stores it as chunk (j - r) mod W.)
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long P = io.param("P"), F = io.param("F");
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [R, F]
    for (long long c = 0; c < W; ++c) {
      const long long j = (r + c) % W, k = (W - c) % W;
      const std::vector<double>& feat = io.inputs[j][0].values;  // [Ns, F]
      const std::vector<double>& ids = io.inputs[j][1].values;   // [R]
      for (long long i = 0; i < P; ++i) {
        const long long row = static_cast<long long>(ids[k * P + i]);
        for (long long f = 0; f < F; ++f) out[(c * P + i) * F + f] = feat[row * F + f];
      }
    }
  }
}
