// CPU oracle for problem 62: for every rank (p, a) of the polar x azimuth grid, Z [B, C, K, Hl, Ll]
// straight from the definition — for channel c of azimuth slab a' = c / Cl, the sum over the polar
// ranks p' of rank (p', a')'s psi contraction of X at latitude p' Hl + hl — and then the einsum with
// this rank's weight plus its bias, in double. The all-to-alls are only index arithmetic here: X
// at (channel c, latitude p' Hl + hl, longitude lon) is x of rank (p', lon / Ll) at (c, hl, lon % Ll).
// Costs W B C K Hl Ll P E + W B O C K Hl Ll multiply-adds (4e8 at the default, W = 4).
#include <vector>

#include "spec/oracle.hpp"

namespace {

struct Grid {
  size_t A, P, K, E, H, L, Hl, Ll, Cl, B, C, O;
};

// Z[b][c][k][hl][l] of rank (p, a): Y of rank (p, c / Cl) at [b, c % Cl, k, p Hl + hl, a Ll + l], where
// Y sums over p' the contraction of rank (p', c / Cl): sum_e psi[k, h, e] X[b, c, p' Hl + (h mod Hl),
// (h + e (k + 1) + lon) mod L]. Channel c is the same global channel on the sending and receiving
// side (the first all-to-all hands rank (p', a') channels a' Cl .. of its latitude slab).
std::vector<double> gather_z(const pkb::OracleIO& io, const Grid& g, size_t p, size_t a) {
  std::vector<double> z(g.B * g.C * g.K * g.Hl * g.Ll, 0.0);
  for (size_t b = 0; b < g.B; ++b)
    for (size_t c = 0; c < g.C; ++c) {
      const size_t a_src = c / g.Cl;  // azimuth rank whose contraction covers channel c
      for (size_t k = 0; k < g.K; ++k)
        for (size_t hl = 0; hl < g.Hl; ++hl) {
          const size_t h = p * g.Hl + hl;
          for (size_t l = 0; l < g.Ll; ++l) {
            const size_t lon = a * g.Ll + l;
            double acc = 0.0;
            for (size_t pp = 0; pp < g.P; ++pp) {
              const std::vector<double>& psi = io.inputs[pp * g.A + a_src][1].values;  // [K, H, E]
              for (size_t e = 0; e < g.E; ++e) {
                const size_t lx = (h + e * (k + 1) + lon) % g.L;
                const std::vector<double>& x = io.inputs[pp * g.A + lx / g.Ll][0].values;  // [B, C, Hl, Ll]
                acc += psi[(k * g.H + h) * g.E + e] * x[((b * g.C + c) * g.Hl + h % g.Hl) * g.Ll + lx % g.Ll];
              }
            }
            z[(((b * g.C + c) * g.K + k) * g.Hl + hl) * g.Ll + l] = acc;
          }
        }
    }
  return z;
}

}  // namespace

PKB_ORACLE(io) {
  Grid g{};
  g.A = io.param("A"), g.P = io.param("P"), g.K = io.param("K"), g.E = io.param("E");
  g.H = io.param("H"), g.L = io.param("L"), g.Hl = io.param("Hl"), g.Ll = io.param("Ll");
  g.Cl = io.param("Cl"), g.B = io.param("B"), g.C = io.param("C"), g.O = io.param("O");
  const size_t n = g.Hl * g.Ll;
  for (int r = 0; r < io.world; ++r) {
    const size_t p = r / g.A, a = r % g.A;
    const std::vector<double> z = gather_z(io, g, p, a);
    const std::vector<double>& w = io.inputs[r][2].values;     // [O, C, K]
    const std::vector<double>& bias = io.inputs[r][3].values;  // [O]
    std::vector<double>& out = io.outputs[r][0].values;        // [B, O, Hl, Ll]
    for (size_t b = 0; b < g.B; ++b)
      for (size_t o = 0; o < g.O; ++o) {
        double* row = &out[(b * g.O + o) * n];
        for (size_t i = 0; i < n; ++i) row[i] = 0.0;
        for (size_t c = 0; c < g.C; ++c)
          for (size_t k = 0; k < g.K; ++k) {
            const double wv = w[(o * g.C + c) * g.K + k];
            const double* zr = &z[((b * g.C + c) * g.K + k) * n];
            for (size_t i = 0; i < n; ++i) row[i] += wv * zr[i];
          }
        for (size_t i = 0; i < n; ++i) row[i] += bias[o];
      }
  }
}
