// CPU oracle for problem 37: out[b, s, j H + h, d] = x_j[b, rank Sl + s, h, d] on rank `rank`, and 0
// where rank Sl + s falls in PKB's zero padding (>= S).
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long B = io.param("B"), S = io.param("S"), H = io.param("H"), Dh = io.param("Dh");
  const long long Sl = io.param("Sl");
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [B, Sl, W H, Dh], zeroed by the harness
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [B, S, H, Dh]
      for (long long b = 0; b < B; ++b)
        for (long long s = 0; s < Sl; ++s) {
          long long t = r * Sl + s;  // position in the padded sequence
          if (t >= S) continue;      // padding: stays 0
          for (long long h = 0; h < H; ++h)
            for (long long d = 0; d < Dh; ++d)
              out[((b * Sl + s) * W * H + j * H + h) * Dh + d] = x[((b * S + t) * H + h) * Dh + d];
        }
    }
  }
}
