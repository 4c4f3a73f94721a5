// CPU oracle for problem 51 (moe_ep_narrow): problem 31's EP fused MoE forward inside EP groups of
// E consecutive ranks (E = the spec's E, the largest proper divisor of W), expert e of group g on
// world rank g E + e, top TOPK = min(2, E).
//
// Routing is reproduced at PKB's rounding points, because a token routed differently gets a
// different row: logits = D(x · W_gᵀ + b_g) (an integer well below 256 in magnitude, as the spec's
// ternary router inputs make it, so exact in double and in D alike),
// probs = D(softmax(logits)) (computed here in double and rounded once; torch computes in fp32, a
// few fp32 ulps away, which can move a prob by one D step only at a rounding boundary — harmless
// to the weights and, as only equal logits give equal probs at non-negligible values, to the
// choice; with E = 1 the prob is exactly 1), then the top TOPK of the rounded probs with an equal
// value at the boundary going to the lower expert index (what torch.topk returns: elements above
// the k-th value, then those equal to it in index order). Everything after routing is in double:
// the tolerance covers the baseline's roundings in the MLP and the combine.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/numeric.hpp"
#include "spec/oracle.hpp"

namespace {

constexpr int kMaxExperts = 16;  // E <= 12 for W <= 24

/// Rounds a double to the benchmark dtype once (bf16: via a round-to-odd float, which makes the
/// two-step conversion a correct single rounding; fp32: a plain conversion).
double round_to(double v, bool bf16) {
  float f = static_cast<float>(v);
  if (!bf16) return f;
  if (static_cast<double>(f) != v && std::isfinite(f)) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);  // truncate
    uint32_t u = pkb::num::float_bits(f) | 1u;                                            // sticky bit
    f = pkb::num::bits_float(u);
  }
  return pkb::num::bf16_to_float(pkb::num::float_to_bf16(f));
}

struct Mlp {
  const std::vector<double>&gw, &gb, &uw, &ub, &dw, &db;
  int n, inner;
  /// down(silu(gate(x)) * up(x)) for one token, in double.
  void apply(const double* x, double* y) const {
    std::vector<double> h(inner);
    for (int j = 0; j < inner; ++j) {
      double g = gb[j], u = ub[j];
      const double* gr = &gw[static_cast<size_t>(j) * n];
      const double* ur = &uw[static_cast<size_t>(j) * n];
      for (int i = 0; i < n; ++i) {
        g += gr[i] * x[i];
        u += ur[i] * x[i];
      }
      h[j] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int c = 0; c < n; ++c) {
      double v = db[c];
      const double* dr = &dw[static_cast<size_t>(c) * inner];
      for (int j = 0; j < inner; ++j) v += dr[j] * h[j];
      y[c] = v;
    }
  }
};

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const int E = static_cast<int>(io.param("E"));
  const int topk = static_cast<int>(io.param("TOPK"));
  const int inner = static_cast<int>(io.param("I"));
  const int M = static_cast<int>(io.param("M"));
  const int N = static_cast<int>(io.param("N"));
  const bool bf16 = io.param("e") == 2;  // the spec allows bf16 and fp32 only

  std::vector<Mlp> mlp;
  for (int r = 0; r < W; ++r) {
    auto& in = io.inputs[r];
    mlp.push_back(Mlp{in[3].values, in[4].values, in[5].values, in[6].values, in[7].values, in[8].values, N, inner});
  }

  std::vector<double> y(N);
  for (int r = 0; r < W; ++r) {
    const int group_base = (r / E) * E;  // world rank of expert 0 of r's EP group
    const auto& x = io.inputs[r][0].values;
    const auto& gw = io.inputs[r][1].values;
    const auto& gb = io.inputs[r][2].values;
    auto& out = io.outputs[r][0].values;
    for (int t = 0; t < M; ++t) {
      const double* xt = &x[static_cast<size_t>(t) * N];
      double logit[kMaxExperts], prob[kMaxExperts], mx = -INFINITY, sum = 0.0;
      for (int e = 0; e < E; ++e) {
        double d = gb[e];
        for (int i = 0; i < N; ++i) d += xt[i] * gw[static_cast<size_t>(e) * N + i];
        logit[e] = round_to(d, bf16);
        mx = std::fmax(mx, logit[e]);
      }
      for (int e = 0; e < E; ++e) sum += std::exp(logit[e] - mx);
      for (int e = 0; e < E; ++e) prob[e] = round_to(std::exp(logit[e] - mx) / sum, bf16);
      // Top TOPK (1 or 2), the lower index winning among equal values.
      int chosen[2] = {0, -1};
      for (int e = 1; e < E; ++e)
        if (prob[e] > prob[chosen[0]]) chosen[0] = e;
      if (topk > 1) {
        chosen[1] = chosen[0] == 0 ? 1 : 0;
        for (int e = chosen[1] + 1; e < E; ++e)
          if (e != chosen[0] && prob[e] > prob[chosen[1]]) chosen[1] = e;
      }
      double* row = &out[static_cast<size_t>(t) * N];
      for (int c = 0; c < N; ++c) row[c] = 0.0;
      for (int k = 0; k < topk; ++k) {
        mlp[group_base + chosen[k]].apply(xt, y.data());  // one expert per rank
        for (int c = 0; c < N; ++c) row[c] += prob[chosen[k]] * y[c];
      }
    }
  }
}
