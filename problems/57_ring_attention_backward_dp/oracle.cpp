// CPU oracle for problem 57: world rank r = g CP + c (DP replica g, CP rank c). Inside replica g, for
// every (sequence b, head h), query i of CP rank c and key j of CP rank t (positions of those ranks):
//   P_ij  = exp(Dh^-1/2 q_i . k_j - lse_i)             (lse: c's input, used as given, not renormalised)
//   dS_ij = P_ij (dout_i . v_j - dout_i . out_i)
//   dq_i += Dh^-1/2 dS_ij k_j,  dk_j += Dh^-1/2 dS_ij q_i,  dv_j += P_ij dout_i
// summed over every (c, t) pair of the replica (non-causal), in double. PyTorch's roundings are
// emulated where they land: each rank's fp32 gradient cast to D (.to(q.dtype)), the DP all-reduce
// of two D values (one rounding, as NCCL's sum of two) and the division by 2 in D. PKB's ring only
// changes where the fp32 partial sums are formed, not what they sum.
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

enum Input { kDout, kQ, kK, kV, kOut, kLse };
enum Output { kDq, kDk, kDv };

struct Dims {
  size_t B, S, H, Dh;
  size_t at(size_t b, size_t s, size_t h) const { return ((b * S + s) * H + h) * Dh; }  // [B, S, H, Dh]
};

// Accumulates the block of query rank `qr` against key rank `kr` into grads[qr][kDq] and
// grads[kr][kDk], grads[kr][kDv] (all [B, S, H, Dh], double).
using Grads = std::vector<std::vector<std::vector<double>>>;  // [rank][dq, dk, dv][element]

void block(const pkb::OracleIO& io, const Dims& d, int qr, int kr, Grads& grads) {
  const auto& in_q = io.inputs[qr];
  const auto& in_k = io.inputs[kr];
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.Dh));
  std::vector<double>& dq = grads[qr][kDq];
  std::vector<double>& dk = grads[kr][kDk];
  std::vector<double>& dv = grads[kr][kDv];
  for (size_t b = 0; b < d.B; ++b)
    for (size_t h = 0; h < d.H; ++h)
      for (size_t i = 0; i < d.S; ++i) {
        const size_t qi = d.at(b, i, h);
        const double* q = &in_q[kQ].values[qi];
        const double* g = &in_q[kDout].values[qi];
        const double* o = &in_q[kOut].values[qi];
        const double lse = in_q[kLse].values[(b * d.H + h) * d.S + i];
        double row_dot = 0.0;
        for (size_t e = 0; e < d.Dh; ++e) row_dot += g[e] * o[e];
        for (size_t j = 0; j < d.S; ++j) {
          const size_t kj = d.at(b, j, h);
          const double* k = &in_k[kK].values[kj];
          const double* v = &in_k[kV].values[kj];
          double s = 0.0, dp = 0.0;
          for (size_t e = 0; e < d.Dh; ++e) {
            s += q[e] * k[e];
            dp += g[e] * v[e];
          }
          const double p = std::exp(s * scale - lse);
          const double ds = p * (dp - row_dot);
          for (size_t e = 0; e < d.Dh; ++e) {
            dq[qi + e] += scale * ds * k[e];
            dk[kj + e] += scale * ds * q[e];
            dv[kj + e] += p * g[e];
          }
        }
      }
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world, CP = static_cast<int>(io.param("CP")), DP = W / CP;
  const Dims d{static_cast<size_t>(io.param("B")), static_cast<size_t>(io.param("S")),
               static_cast<size_t>(io.param("H")), static_cast<size_t>(io.param("Dh"))};
  const pkb::Narrow nd = pkb::infer_narrow(io, io.inputs[0][kDout].values);
  const size_t n = d.B * d.S * d.H * d.Dh;
  Grads grads(W, std::vector<std::vector<double>>(3, std::vector<double>(n, 0.0)));
  for (int g = 0; g < DP; ++g)
    for (int c = 0; c < CP; ++c)
      for (int t = 0; t < CP; ++t) block(io, d, g * CP + c, g * CP + t, grads);
  for (auto& rank : grads)  // dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
    for (auto& x : rank)
      for (double& v : x) v = pkb::round_to(nd, v);
  for (int r = 0; r < W; ++r) {
    const int c = r % CP;
    for (int o = 0; o < 3; ++o) {
      std::vector<double>& y = io.outputs[r][o].values;
      for (size_t i = 0; i < n; ++i) {
        double s = 0.0;
        for (int g = 0; g < DP; ++g) s += grads[g * CP + c][o][i];
        y[i] = pkb::round_to(nd, pkb::round_to(nd, s) / DP);  // all_reduce (sum) in D, then div_ in D
      }
    }
  }
}
