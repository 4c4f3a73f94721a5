// CPU oracle for problem 43: PKB's Adam step on every rank's shard, then the gather. Each op is
// computed in double and rounded to fp32 and then to D, as PyTorch computes every op on a D tensor in
// fp32 and stores it in D (for one multiply, add, divide or square root of D values, the double result
// rounded to fp32 is PyTorch's fp32 result; `a + alpha b` is one fma in PyTorch's fp32 kernels). The
// scalar arguments are fp32 as PyTorch passes them to its kernels: b1, b2, 1 - b1, 1 - b2, eps, -lr,
// and the reciprocals of the double bias corrections rounded to fp32.
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999;  // PKB: lr, beta1, beta2
constexpr float kEps = 1e-8f;                               // PKB: eps

double f32(double v) { return static_cast<float>(v); }

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t P = io.param("P");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  auto rd = [d](double v) { return pkb::round_to(d, v); };
  const double b1 = f32(kBeta1), b2 = f32(kBeta2), a1 = f32(1.0 - kBeta1), a2 = f32(1.0 - kBeta2);
  const double neg_lr = f32(-kLr), eps = kEps;
  for (int r = 0; r < W; ++r) {
    const auto& in = io.inputs[r];
    const double step = in[4].values[0];
    const double inv_bc1 = 1.0f / static_cast<float>(1.0 - std::pow(kBeta1, step));
    const double inv_bc2 = 1.0f / static_cast<float>(1.0 - std::pow(kBeta2, step));
    for (size_t i = 0; i < P; ++i) {
      const double g = in[0].values[i], w = in[1].values[i];
      double m = rd(in[2].values[i] * b1);
      m = rd(m + a1 * g);
      double v = rd(in[3].values[i] * b2);
      v = rd(v + a2 * f32(g * g));
      const double m_hat = rd(m * inv_bc1), v_hat = rd(v * inv_bc2);
      double den = rd(std::sqrt(v_hat));
      den = rd(den + eps);
      const double u = rd(rd(m_hat / den) * neg_lr);
      const double w_new = rd(w + u);
      for (int s = 0; s < W; ++s) io.outputs[s][0].values[r * P + i] = w_new;
    }
  }
}
