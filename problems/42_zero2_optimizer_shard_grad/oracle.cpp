// CPU oracle for problem 42 (a ZeRO-2 training step): rank 0's parameters are what every rank uses (the
// broadcast); each rank runs the ReLU-MLP forward, the MSE loss and its backward on its own batch;
// the gradients are summed over ranks and divided by W; rank r runs Adam on its own slice
// [r P/W, (r+1) P/W) of the flat parameters with its own exp_avg / exp_avg_sq slice, and the updated
// slices are gathered into every rank's full parameters. Every op is computed in double and rounded
// to fp32 and then to D where PyTorch stores a D tensor (pkb::round_to): the two GEMM + bias outputs,
// out - y, the loss-gradient scale product, the four gradient GEMMs / column sums, the summed
// gradient, its / W, and each of Adam's eleven elementwise ops (problem 43's chain). The scalar
// arguments are fp32, as PyTorch passes them to its kernels. What the oracle cannot know is NCCL's
// summation order (the reduce-scatter of the flat gradient): it rounds the exact sum of the W gradients once.
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999;  // PKB: lr, beta1, beta2
constexpr float kEps = 1e-8f;                               // PKB: eps

double f32(double v) { return static_cast<float>(v); }

using Vec = std::vector<double>;

struct Mlp {
  size_t rows, din, hid, dout;  // local batch, layer widths
  size_t numel() const { return hid * din + hid + dout * hid + dout; }
};

/// The flat gradient [dW1, db1, dW2, db2] of mean((relu(X W1^T + b1) W2^T + b2 - y)^2) at the flat
/// parameters p, with PyTorch's roundings to D (autograd's ops: addmm, relu, mse_loss_backward,
/// the mm's of addmm's backward, threshold_backward and the bias sums).
Vec local_grad(const Mlp& m, const Vec& X, const Vec& y, const Vec& p, pkb::Narrow d) {
  auto rd = [d](double v) { return pkb::round_to(d, v); };
  const double* W1 = p.data();
  const double* b1 = W1 + m.hid * m.din;
  const double* W2 = b1 + m.hid;
  const double* b2 = W2 + m.dout * m.hid;
  Vec h(m.rows * m.hid), dout(m.rows * m.dout), gh(m.rows * m.hid, 0.0);
  for (size_t b = 0; b < m.rows; ++b)
    for (size_t j = 0; j < m.hid; ++j) {
      double s = b1[j];
      for (size_t k = 0; k < m.din; ++k) s += X[b * m.din + k] * W1[j * m.din + k];
      h[b * m.hid + j] = std::max(rd(s), 0.0);  // F.relu of the D result of F.linear
    }
  // mse_loss_backward in D arithmetic: alpha (2 / numel, rounded to D) * (out - y) * 1, each op rounded.
  const double alpha = rd(2.0 / static_cast<double>(m.rows * m.dout));
  for (size_t b = 0; b < m.rows; ++b)
    for (size_t o = 0; o < m.dout; ++o) {
      double s = b2[o];
      for (size_t j = 0; j < m.hid; ++j) s += h[b * m.hid + j] * W2[o * m.hid + j];
      dout[b * m.dout + o] = rd(alpha * rd(rd(s) - y[b * m.dout + o]));
    }
  Vec g(m.numel(), 0.0);
  double* gW1 = g.data();
  double* gb1 = gW1 + m.hid * m.din;
  double* gW2 = gb1 + m.hid;
  double* gb2 = gW2 + m.dout * m.hid;
  for (size_t b = 0; b < m.rows; ++b)
    for (size_t o = 0; o < m.dout; ++o) {
      const double t = dout[b * m.dout + o];
      gb2[o] += t;
      for (size_t j = 0; j < m.hid; ++j) {
        gW2[o * m.hid + j] += t * h[b * m.hid + j];
        gh[b * m.hid + j] += t * W2[o * m.hid + j];
      }
    }
  for (size_t b = 0; b < m.rows; ++b)
    for (size_t j = 0; j < m.hid; ++j) {
      // threshold_backward on relu's result: no gradient where h <= 0.
      const double t = h[b * m.hid + j] > 0.0 ? rd(gh[b * m.hid + j]) : 0.0;
      gb1[j] += t;
      for (size_t k = 0; k < m.din; ++k) gW1[j * m.din + k] += t * X[b * m.din + k];
    }
  for (double& v : g) v = rd(v);  // each gradient GEMM / bias sum is stored in D once
  return g;
}

/// Adam on one element, PKB's op order with every op rounded to D (see problem 43).
struct Adam {
  pkb::Narrow d;
  double inv_bc1, inv_bc2;
  void step(double g, double& w, double& m, double& v) const {
    auto rd = [this](double x) { return pkb::round_to(d, x); };
    m = rd(m * f32(kBeta1));
    m = rd(m + f32(1.0 - kBeta1) * g);
    v = rd(v * f32(kBeta2));
    v = rd(v + f32(1.0 - kBeta2) * f32(g * g));
    const double m_hat = rd(m * inv_bc1), v_hat = rd(v * inv_bc2);
    double den = rd(std::sqrt(v_hat));
    den = rd(den + static_cast<double>(kEps));
    const double u = rd(rd(m_hat / den) * f32(-kLr));
    w = rd(w + u);
  }
};

/// The four tensors [W1, b1, W2, b2] starting at input `first`, as one flat vector, and back into
/// the outputs starting at `first`.
Vec flatten(const std::vector<pkb::OracleTensor>& ts, size_t first) {
  Vec flat;
  for (size_t t = first; t < first + 4; ++t) flat.insert(flat.end(), ts[t].values.begin(), ts[t].values.end());
  return flat;
}
void unflatten(const Vec& flat, std::vector<pkb::OracleTensor>& ts, size_t first) {
  size_t at = 0;
  for (size_t t = first; t < first + 4; ++t)
    for (double& v : ts[t].values) v = flat[at++];
}

}  // namespace

PKB_ORACLE(io) {
  // inputs: 0 X_local, 1 y_local, 2-5 W1 b1 W2 b2, 6 exp_avg_part, 7 exp_avg_sq_part;
  // outputs: 0-3 the updated (gathered) parameters, 4 exp_avg_part, 5 exp_avg_sq_part.
  const int W = io.world;
  const Mlp m{static_cast<size_t>(io.param("B") / W), static_cast<size_t>(io.param("DIN")),
              static_cast<size_t>(io.param("HID")), static_cast<size_t>(io.param("DOUT"))};
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  auto rd = [d](double v) { return pkb::round_to(d, v); };
  const Vec p = flatten(io.inputs[0], 2);  // the broadcast: rank 0's values everywhere
  Vec sum(m.numel(), 0.0);
  for (int r = 0; r < W; ++r) {
    const Vec g = local_grad(m, io.inputs[r][0].values, io.inputs[r][1].values, p, d);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
  }
  const double inv_w = f32(1.0 / W);  // g_part.div_(W): a product with the fp32 reciprocal
  const double step = static_cast<double>(io.param("step"));
  const Adam adam{d, f32(1.0f / static_cast<float>(1.0 - std::pow(kBeta1, step))),
                  f32(1.0f / static_cast<float>(1.0 - std::pow(kBeta2, step)))};
  const size_t part = m.numel() / W;
  Vec w = p;
  for (int r = 0; r < W; ++r) {
    Vec& mom = io.outputs[r][4].values;
    Vec& var = io.outputs[r][5].values;
    mom = io.inputs[r][6].values;
    var = io.inputs[r][7].values;
    for (size_t i = 0; i < part; ++i) {
      const size_t j = r * part + i;
      adam.step(rd(rd(sum[j]) * inv_w), w[j], mom[i], var[i]);
    }
  }
  for (int r = 0; r < W; ++r) unflatten(w, io.outputs[r], 0);
}
