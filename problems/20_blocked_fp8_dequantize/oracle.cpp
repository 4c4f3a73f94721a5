// CPU oracle for problem 20: rank r's out[j] is rank j's chunk r dequantized, x = y * s[flat / BS]. The
// product of two D values is exact in double; the cast to float is the one rounding of PKB's fp32
// multiply (none for bf16 and fp16 inputs, whose products fit in fp32).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t chunk = static_cast<size_t>(io.param("M") * io.param("N"));
  const size_t bs = static_cast<size_t>(io.param("BS"));
  for (int j = 0; j < W; ++j) {  // the sender
    const std::vector<double>& y = io.inputs[j][0].values;
    const std::vector<double>& s = io.inputs[j][1].values;
    for (int r = 0; r < W; ++r)  // the receiver of chunk r
      for (size_t i = 0; i < chunk; ++i) {
        const size_t flat = r * chunk + i;
        io.outputs[r][0].values[j * chunk + i] = static_cast<float>(y[flat] * s[flat / bs]);
      }
  }
}
