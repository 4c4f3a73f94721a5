// CPU oracle for problem 32 (EP fused MoE forward with LoRA adapters): problem 31's oracle with
// PKB's LoRA expert, g = gate(x) + (x A_gᵀ) B_gᵀ, u = up(x) + (x A_uᵀ) B_uᵀ, y = SiLU(g) u,
// out = down(y) + (y A_dᵀ) B_dᵀ.
//
// Routing is reproduced at PKB's rounding points, because a token routed differently gets a
// different row: logits = D(x · W_gᵀ + b_g) (an integer well below 256 in magnitude, as the spec's
// ternary router inputs make it, so exact in double and in D alike),
// probs = D(softmax(logits)) (computed here in double and rounded once; torch computes in fp32, a
// few fp32 ulps away, which can move a prob by one D step only at a rounding boundary — harmless
// to the weights and, as only equal logits give equal probs at non-negligible values, to the
// choice), then the top 2 of the rounded probs with an equal value at the boundary going to the
// lower expert index (what torch.topk returns: elements above the k-th value, then those equal
// to it in index order). Everything after routing is in double: the tolerance covers the
// baseline's roundings in the MLP and the combine.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/numeric.hpp"
#include "spec/oracle.hpp"

namespace {

constexpr int kExperts = 8;

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

/// out[o] = Σ_i a[o, i] · x[i] for a row-major a of `rows` x `cols` (F.linear without a bias).
void matvec(const std::vector<double>& a, const double* x, int rows, int cols, double* out) {
  for (int o = 0; o < rows; ++o) {
    const double* ar = &a[static_cast<size_t>(o) * cols];
    double v = 0.0;
    for (int i = 0; i < cols; ++i) v += ar[i] * x[i];
    out[o] = v;
  }
}

/// One rank's LoRA expert: the three nn.Linear layers and the six LoRA factors (A: [LR, in],
/// B: [out, LR]).
struct Mlp {
  const std::vector<double>&gw, &gb, &uw, &ub, &dw, &db;
  const std::vector<double>&ga, &gbb, &ua, &ubb, &da, &dbb;
  int n, inner, rank;
  /// down(y) + (y A_dᵀ) B_dᵀ with y = silu(g) * u, for one token, in double.
  void apply(const double* x, double* out) const {
    std::vector<double> xa(rank), xb(rank), lg(inner), lu(inner), h(inner);
    matvec(ga, x, rank, n, xa.data());
    matvec(ua, x, rank, n, xb.data());
    matvec(gbb, xa.data(), inner, rank, lg.data());
    matvec(ubb, xb.data(), inner, rank, lu.data());
    for (int j = 0; j < inner; ++j) {
      double g = gb[j] + lg[j], u = ub[j] + lu[j];
      const double* gr = &gw[static_cast<size_t>(j) * n];
      const double* ur = &uw[static_cast<size_t>(j) * n];
      for (int i = 0; i < n; ++i) {
        g += gr[i] * x[i];
        u += ur[i] * x[i];
      }
      h[j] = g / (1.0 + std::exp(-g)) * u;
    }
    std::vector<double> ya(rank), ld(n);
    matvec(da, h.data(), rank, inner, ya.data());
    matvec(dbb, ya.data(), n, rank, ld.data());
    for (int c = 0; c < n; ++c) {
      double v = db[c] + ld[c];
      const double* dr = &dw[static_cast<size_t>(c) * inner];
      for (int j = 0; j < inner; ++j) v += dr[j] * h[j];
      out[c] = v;
    }
  }
};

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const int L = static_cast<int>(io.param("L"));
  const int inner = static_cast<int>(io.param("I"));
  const int lora_rank = static_cast<int>(io.param("LR"));
  const int M = static_cast<int>(io.param("M"));
  const int N = static_cast<int>(io.param("N"));
  const bool bf16 = io.param("e") == 2;  // the spec allows bf16 and fp32 only

  std::vector<Mlp> mlp;
  for (int r = 0; r < W; ++r) {
    auto& in = io.inputs[r];
    mlp.push_back(Mlp{in[3].values, in[4].values, in[5].values, in[6].values, in[7].values, in[8].values,
                      in[9].values, in[10].values, in[11].values, in[12].values, in[13].values, in[14].values, N, inner,
                      lora_rank});
  }

  std::vector<double> y0(N), y1(N);
  for (int r = 0; r < W; ++r) {
    const auto& x = io.inputs[r][0].values;
    const auto& gw = io.inputs[r][1].values;
    const auto& gb = io.inputs[r][2].values;
    auto& out = io.outputs[r][0].values;
    for (int t = 0; t < M; ++t) {
      const double* xt = &x[static_cast<size_t>(t) * N];
      double logit[kExperts], prob[kExperts], mx = -INFINITY, sum = 0.0;
      for (int e = 0; e < kExperts; ++e) {
        double d = gb[e];
        for (int i = 0; i < N; ++i) d += xt[i] * gw[static_cast<size_t>(e) * N + i];
        logit[e] = round_to(d, bf16);
        mx = std::fmax(mx, logit[e]);
      }
      for (int e = 0; e < kExperts; ++e) sum += std::exp(logit[e] - mx);
      for (int e = 0; e < kExperts; ++e) prob[e] = round_to(std::exp(logit[e] - mx) / sum, bf16);
      // Top 2, the lower index winning among equal values.
      int a = 0;
      for (int e = 1; e < kExperts; ++e)
        if (prob[e] > prob[a]) a = e;
      int b = a == 0 ? 1 : 0;
      for (int e = b + 1; e < kExperts; ++e)
        if (e != a && prob[e] > prob[b]) b = e;
      int owner_a = a / L, owner_b = b / L;
      mlp[owner_a].apply(xt, y0.data());
      if (owner_b != owner_a) mlp[owner_b].apply(xt, y1.data());
      const std::vector<double>& yb = owner_b == owner_a ? y0 : y1;
      for (int c = 0; c < N; ++c) out[static_cast<size_t>(t) * N + c] = prob[a] * y0[c] + prob[b] * yb[c];
    }
  }
}
