// CPU oracle for problem 36: out[b, j S + s, h, d] = x_j[b, s, rank H/W + h, d] on rank `rank`.
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long B = io.param("B"), S = io.param("S"), H = io.param("H"), Dh = io.param("Dh");
  const long long Hl = H / W;
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [B, W S, Hl, Dh]
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [B, S, H, Dh]
      for (long long b = 0; b < B; ++b)
        for (long long s = 0; s < S; ++s)
          for (long long h = 0; h < Hl; ++h)
            for (long long d = 0; d < Dh; ++d)
              out[((b * W * S + j * S + s) * Hl + h) * Dh + d] = x[((b * S + s) * H + r * Hl + h) * Dh + d];
    }
  }
}
