// CPU oracle for problem 45: rank r reduces chunk r (R H elements) of every rank's flat input, divides
// it by W in D, and returns each row of H normalized by its root mean square (eps 1e-5) times gamma.
// The sum is exact (grid inputs, see spec.toml); the division is emulated as PyTorch runs it — an fp32
// multiplication by the fp32 reciprocal of W, rounded to D (exact when W is a power of two); the norm
// is in double. Oracles are not told D: e = 4 is fp32; for e = 2 it is bf16 when every value of gamma
// is a bf16 value (random fp16 values essentially never all are), else fp16.
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kEps = 1e-5;  // PKB: eps = 1e-5

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t R = io.param("R"), H = io.param("H"), chunk = R * H;
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][1].values);
  const float inv_world = 1.0f / static_cast<float>(W);
  std::vector<double> x(chunk);
  for (int r = 0; r < W; ++r) {
    for (size_t i = 0; i < chunk; ++i) {
      double s = 0.0;
      for (int q = 0; q < W; ++q) s += io.inputs[q][0].values[r * chunk + i];
      // The product of two floats is exact in double; the cast rounds it as the fp32 multiply does.
      x[i] = pkb::round_to(d, static_cast<float>(s * static_cast<double>(inv_world)));
    }
    const std::vector<double>& gamma = io.inputs[r][1].values;
    for (size_t row = 0; row < R; ++row) {
      double ss = 0.0;
      for (size_t h = 0; h < H; ++h) ss += x[row * H + h] * x[row * H + h];
      const double rms = 1.0 / std::sqrt(ss / static_cast<double>(H) + kEps);
      for (size_t h = 0; h < H; ++h) io.outputs[r][0].values[row * H + h] = x[row * H + h] * rms * gamma[h];
    }
  }
}
