// CPU oracle for problem 9: every rank gets d_gamma = sum over ranks r of D(sum over rank r's rows of
// D(dY X_hat)) and d_beta = sum over ranks r of D(sum over rank r's rows of dY): the product and each
// rank's column sum are rounded to D as PKB's D tensors are (the fp32 accumulation itself is taken as
// exact); the all-reduce's sum is exact here, its roundings in D being covered by the tolerance.
#include <algorithm>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t M = io.param("M"), N = io.param("N");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][1].values);
  std::vector<double> d_gamma(N, 0.0), d_beta(N, 0.0), g(N), b(N);
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& x = io.inputs[r][0].values;   // X_hat [M, N]
    const std::vector<double>& dy = io.inputs[r][1].values;  // dY [M, N]
    std::fill(g.begin(), g.end(), 0.0);
    std::fill(b.begin(), b.end(), 0.0);
    for (size_t m = 0; m < M; ++m)
      for (size_t n = 0; n < N; ++n) {
        const double v = dy[m * N + n];
        b[n] += v;
        g[n] += pkb::round_to(d, v * x[m * N + n]);
      }
    for (size_t n = 0; n < N; ++n) {
      d_gamma[n] += pkb::round_to(d, g[n]);
      d_beta[n] += pkb::round_to(d, b[n]);
    }
  }
  for (int r = 0; r < W; ++r) {
    io.outputs[r][0].values = d_gamma;
    io.outputs[r][1].values = d_beta;
  }
}
