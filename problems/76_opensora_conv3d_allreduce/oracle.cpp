// CPU oracle for problem 76: every rank's conv3d of its input-channel shard in double, each rounded
// to D as PyTorch's conv output is, summed over the ranks (NCCL's per-hop roundings are left to the
// tolerance), rounded to D, and the shared bias added with one more rounding. Costs C^2 27 (T-2)(Y-2)
// multiply-adds: tiny and small only.
#include <vector>

#include "spec/oracle.hpp"

namespace {

// acc[o][t][y][x] += sum over j, kt, ky, kx of w[o][j][kt][ky][kx] x[j][t+kt][y+ky][x+kx].
void conv3d_accumulate(const std::vector<double>& x, const std::vector<double>& w, size_t C, size_t Cl, size_t T,
                       size_t Y, size_t X, std::vector<double>& acc) {
  const size_t T2 = T - 2, Y2 = Y - 2, X2 = X - 2;
  for (size_t o = 0; o < C; ++o)
    for (size_t j = 0; j < Cl; ++j)
      for (size_t kt = 0; kt < 3; ++kt)
        for (size_t ky = 0; ky < 3; ++ky)
          for (size_t kx = 0; kx < 3; ++kx) {
            double wv = w[(((o * Cl + j) * 3 + kt) * 3 + ky) * 3 + kx];
            for (size_t t = 0; t < T2; ++t)
              for (size_t y = 0; y < Y2; ++y) {
                const double* xr = &x[((j * T + t + kt) * Y + y + ky) * X + kx];
                double* ar = &acc[((o * T2 + t) * Y2 + y) * X2];
                for (size_t i = 0; i < X2; ++i) ar[i] += wv * xr[i];
              }
          }
}

}  // namespace

PKB_ORACLE(io) {
  const size_t C = io.param("C"), T = io.param("T"), Y = io.param("Y"), X = io.param("X");
  const size_t Cl = C / io.world, spatial = (T - 2) * (Y - 2) * (X - 2);
  const std::vector<double>& bias = io.inputs[0][2].values;  // shared: the same on every rank
  const pkb::Narrow d = pkb::infer_narrow(io, bias);          // bias is drawn in D from a normal
  std::vector<double> sum(C * spatial, 0.0);
  for (int r = 0; r < io.world; ++r) {
    std::vector<double> local(C * spatial, 0.0);
    conv3d_accumulate(io.inputs[r][0].values, io.inputs[r][1].values, C, Cl, T, Y, X, local);
    for (size_t i = 0; i < local.size(); ++i) sum[i] += pkb::round_to(d, local[i]);
  }
  std::vector<double> out(C * spatial);
  for (size_t i = 0; i < out.size(); ++i) out[i] = pkb::round_to(d, pkb::round_to(d, sum[i]) + bias[i / spatial]);
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = out;
}
