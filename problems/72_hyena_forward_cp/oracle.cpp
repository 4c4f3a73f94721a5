// CPU oracle for problem 72: for every channel, the whole sequence in natural order gathered from the
// ranks' zigzag chunks, u = D(x2 v), the causal convolution with the channel's filter summed directly
// in double, + u bias, rounded to D, times x1, rounded to D, and written back at the zigzag position
// of the rank that holds it, transposed ([1, Ls, C]). The roundings to D are PyTorch's: x2 * v and
// x1 * z in D, the convolution and bias term in fp32 (here exact) and one cast to D.
#include <algorithm>
#include <vector>

#include "spec/oracle.hpp"

namespace {

/// Where natural position t of the whole sequence lives: rank `owner`, column `col` of its two
/// zigzag chunks (chunk k < W is rank k's first, chunk 2W-1-k rank k's second).
struct Place {
  long long owner, col;
};

Place zigzag_place(long long t, long long W, long long Lc) {
  const long long k = t / Lc, off = t % Lc;
  return k < W ? Place{k, off} : Place{2 * W - 1 - k, Lc + off};
}

}  // namespace

PKB_ORACLE(io) {
  const long long W = io.world;
  const long long C = io.param("C"), Ls = io.param("Ls"), F = io.param("F"), G = io.param("G");
  const long long L = io.param("L"), Lc = io.param("Lc");
  enum { kX1, kX2, kV, kH, kBias };
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][kX1].values);
  const std::vector<double>& h = io.inputs[0][kH].values;        // [C / G, F], the same on every rank
  const std::vector<double>& bias = io.inputs[0][kBias].values;  // [C]
  std::vector<Place> place(static_cast<size_t>(L));
  for (long long t = 0; t < L; ++t) place[t] = zigzag_place(t, W, Lc);
  std::vector<double> u(static_cast<size_t>(L));
  for (long long g = 0; g < C; ++g) {
    auto at = [&](int input, long long t) {  // input [1, C, Ls] of the rank holding position t
      return io.inputs[place[t].owner][input].values[static_cast<size_t>(g * Ls + place[t].col)];
    };
    for (long long t = 0; t < L; ++t) u[t] = pkb::round_to(d, at(kX2, t) * at(kV, t));
    const double* filter = h.data() + (g / G) * F;
    for (long long t = 0; t < L; ++t) {
      double y = u[t] * bias[g];
      for (long long j = 0, last = std::min(t, F - 1); j <= last; ++j) y += filter[j] * u[t - j];
      const double z = pkb::round_to(d, at(kX1, t) * pkb::round_to(d, y));
      io.outputs[place[t].owner][0].values[static_cast<size_t>(place[t].col * C + g)] = z;
    }
  }
}
