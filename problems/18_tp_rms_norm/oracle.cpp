// CPU oracle for problem 18: out[r] = w[r] * D(x[r] * rsqrt(ss / (N W) + eps)), with ss the sum of x^2
// over the row's columns on every rank. Computed in double, except that the normalized value is
// rounded to D before the weight multiply, as PKB's op order does (.to(input_dtype), then * weight).
// Oracles are not told D: e = 4 is fp32; for e = 2 it is bf16 when every value of rank 0's x is a bf16
// value (random fp16 values essentially never all are), else fp16.
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kEps = 1e-5;  // PKB: variance_epsilon = 1e-5

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), N = io.param("N");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  for (size_t m = 0; m < M; ++m) {
    double ss = 0.0;
    for (int r = 0; r < W; ++r)
      for (size_t n = 0; n < N; ++n) {
        double x = io.inputs[r][0].values[m * N + n];
        ss += x * x;
      }
    const double inv_rms = 1.0 / std::sqrt(ss / static_cast<double>(N * W) + kEps);
    for (int r = 0; r < W; ++r)
      for (size_t n = 0; n < N; ++n) {
        double y = pkb::round_to(d, io.inputs[r][0].values[m * N + n] * inv_rms);
        io.outputs[r][0].values[m * N + n] = io.inputs[r][1].values[n] * y;
      }
  }
}
