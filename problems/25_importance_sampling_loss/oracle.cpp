// CPU oracle for problem 25: every rank's outputs from every rank's inputs, emulating PyTorch's
// roundings in its order: logits = D(h W^T) (exact sums: grid inputs); the label's log-softmax in
// fp32 as PyTorch computes it, lp = D(fl32(fl32(x - max) - fl32(log(sum exp(x - max))))) with the
// sum taken in double; every per-token op rounded to D; each rank's sums accumulated in double and
// rounded to D; the D all-reduces as sums in rank order rounded to D after every addition (NCCL
// rounds at every hop, in an order of its own: see spec.toml); the final divisions and the loss's
// (pg + s) - s in fp32. The fp32 sum of V exponentials on the GPU is the one thing not mirrored.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kClamp = 20.0;  // PKB: delta.clamp(min=-20.0, max=20.0)

float f32(double v) { return static_cast<float>(v); }

/// One rank's local results: the D sums (pg, ratio, k3, entropy, surrogate), min, max, valid count.
struct Local {
  double pg = 0, ratio = 0, k3 = 0, entropy = 0, surrogate = 0;
  double min = INFINITY, max = -INFINITY, count = 0;
};

/// lp = D(log_softmax(x)[label]) in PyTorch's fp32 arithmetic (x: one row of D logits).
double label_logprob(pkb::Narrow d, const std::vector<double>& x, size_t label) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0.0;
  for (double v : x) s += std::exp(static_cast<double>(f32(v - m)));
  const float shifted = f32(x[label] - m);
  const float log_sum = f32(std::log(s));
  return pkb::round_to(d, f32(static_cast<double>(shifted) - log_sum));
}

Local rank_terms(pkb::Narrow d, const std::vector<pkb::OracleTensor>& in, long long ignore, std::vector<double>& lp_out,
                 std::vector<double>& loss_out) {
  const auto& h = in[0].values;
  const auto& w = in[1].values;
  const auto& labels = in[2].values;
  const auto& old_lp = in[3].values;
  const auto& adv = in[4].values;
  const size_t M = static_cast<size_t>(in[0].shape[0]), N = static_cast<size_t>(in[0].shape[1]);
  const size_t V = static_cast<size_t>(in[1].shape[0]);
  Local l;
  double pg = 0, ratio_sum = 0, k3 = 0, ent = 0, sur = 0;
  std::vector<double> row(V);
  for (size_t t = 0; t < M; ++t) {
    const bool valid = static_cast<long long>(labels[t]) != ignore;
    double new_lp = 0.0;
    if (valid) {
      for (size_t v = 0; v < V; ++v) {
        double s = 0.0;
        for (size_t k = 0; k < N; ++k) s += h[t * N + k] * w[v * N + k];
        row[v] = pkb::round_to(d, s);
      }
      new_lp = label_logprob(d, row, static_cast<size_t>(labels[t]));
    }
    const double ce = -new_lp;
    double delta = valid ? pkb::round_to(d, new_lp - old_lp[t]) : 0.0;
    delta = std::clamp(delta, -kClamp, kClamp);
    const double ratio = pkb::round_to(d, std::exp(delta));
    const double wt = valid ? pkb::round_to(d, ratio * adv[t]) : 0.0;
    lp_out[t] = new_lp;
    loss_out[t] = -wt;
    pg += -wt;
    sur += pkb::round_to(d, wt * ce);
    if (valid) {
      ratio_sum += ratio;
      l.min = std::min(l.min, ratio);
      l.max = std::max(l.max, ratio);
      k3 += pkb::round_to(d, pkb::round_to(d, ratio - delta) - 1.0);
      ent += ce;
      l.count += 1.0;
    }
  }
  l.pg = pkb::round_to(d, pg);
  l.ratio = pkb::round_to(d, ratio_sum);
  l.k3 = pkb::round_to(d, k3);
  l.entropy = pkb::round_to(d, ent);
  l.surrogate = pkb::round_to(d, sur);
  l.min = pkb::round_to(d, l.min);
  l.max = pkb::round_to(d, l.max);
  return l;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const long long ignore = io.param("ignore_index");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][3].values);  // old_logprobs: normal draws
  std::vector<Local> local(W);
  for (int r = 0; r < W; ++r)
    local[r] = rank_terms(d, io.inputs[r], ignore, io.outputs[r][1].values, io.outputs[r][2].values);
  // The all-reduces: a D sum rounded after every addition, exact MIN / MAX, the fp32 count.
  Local g = local[0];
  for (int r = 1; r < W; ++r) {
    g.pg = pkb::round_to(d, g.pg + local[r].pg);
    g.ratio = pkb::round_to(d, g.ratio + local[r].ratio);
    g.k3 = pkb::round_to(d, g.k3 + local[r].k3);
    g.entropy = pkb::round_to(d, g.entropy + local[r].entropy);
    g.min = std::min(g.min, local[r].min);
    g.max = std::max(g.max, local[r].max);
    g.count += local[r].count;
  }
  const float n = std::max(f32(g.count), 1.0f);
  for (int r = 0; r < W; ++r) {
    const float true_pg = f32(g.pg / n);
    const float surrogate = f32(local[r].surrogate / n);
    io.outputs[r][0].values[0] = f32(static_cast<double>(f32(static_cast<double>(true_pg) + surrogate)) - surrogate);
    auto& m = io.outputs[r][3].values;
    m[0] = f32(g.ratio / n);
    m[1] = g.min;
    m[2] = g.max;
    m[3] = f32(g.k3 / n);
    m[4] = f32(g.entropy / n);
  }
}
