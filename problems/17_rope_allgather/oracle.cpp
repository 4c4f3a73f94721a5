// CPU oracle for problem 17: every rank's q_global / k_global hold rank j's rotated positions at rows
// j S .. (j+1) S - 1 of each sequence. The rotation is computed per element as PyTorch's op order
// rounds it: D(D(x c) + D(rotate_half(x) s)) (the products and the sum of D values are exact in double,
// so each round_to is the one rounding PyTorch's fp32 op makes, then the cast to D). Oracles are not
// told D: e = 4 is fp32; for e = 2 it is bf16 when every value of rank 0's q is a bf16 value, else fp16.
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t B = io.param("B"), S = io.param("S"), H = io.param("H"), Dh = io.param("Dh"), half = Dh / 2;
  const pkb::Narrow narrow = pkb::infer_narrow(io, io.inputs[0][0].values);
  for (int j = 0; j < W; ++j) {
    const std::vector<double>& cos = io.inputs[j][2].values;
    const std::vector<double>& sin = io.inputs[j][3].values;
    for (int t = 0; t < 2; ++t) {  // q, k
      const std::vector<double>& x = io.inputs[j][t].values;
      for (size_t b = 0; b < B; ++b)
        for (size_t s = 0; s < S; ++s)
          for (size_t h = 0; h < H; ++h)
            for (size_t d = 0; d < Dh; ++d) {
              const size_t src = ((b * S + s) * H + h) * Dh;
              const size_t cs = (b * S + s) * Dh + d;
              const double rot = d < half ? -x[src + d + half] : x[src + d - half];
              const double a = pkb::round_to(narrow, x[src + d] * cos[cs]);
              const double c = pkb::round_to(narrow, rot * sin[cs]);
              const double y = pkb::round_to(narrow, a + c);
              const size_t dst = ((b * W * S + j * S + s) * H + h) * Dh + d;
              for (int r = 0; r < W; ++r) io.outputs[r][t].values[dst] = y;
            }
    }
  }
}
