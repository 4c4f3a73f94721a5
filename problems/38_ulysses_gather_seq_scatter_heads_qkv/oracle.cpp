// CPU oracle for problem 38: out[b, j S + s, c HD/W + k] = qkv_j[b, s, c HD + rank HD/W + k] on rank
// `rank`, for the q, k, v thirds c = 0, 1, 2 (HD = H Dh).
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long B = io.param("B"), S = io.param("S"), HD = io.param("H") * io.param("Dh");
  const long long Hl = HD / W;  // one rank's share of q, k or v
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [B, W S, 3 HD/W]
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [B, S, 3 HD]
      for (long long b = 0; b < B; ++b)
        for (long long s = 0; s < S; ++s)
          for (long long c = 0; c < 3; ++c)
            for (long long k = 0; k < Hl; ++k)
              out[((b * W * S + j * S + s) * 3 + c) * Hl + k] = x[(b * S + s) * 3 * HD + c * HD + r * Hl + k];
    }
  }
}
