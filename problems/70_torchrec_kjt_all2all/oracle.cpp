// CPU oracle for problem 70: rank r's output row f W + s is feature C(r) + f of rank s (its B lengths),
// and the values are those rows' bags in that order; stride = W B, stride_per_rank = B.
#include "spec/oracle.hpp"

namespace {
long long features_of(long long j) { return 1 + j % 3; }
}  // namespace

PKB_ORACLE(io) {
  const long long W = io.world, B = io.param("B"), F = io.param("F");
  // Where each feature's bag starts in each rank's values.
  std::vector<std::vector<long long>> start(W, std::vector<long long>(F + 1, 0));
  for (long long s = 0; s < W; ++s) {
    const std::vector<double>& len = io.inputs[s][0].values;
    for (long long f = 0; f < F; ++f) {
      long long sum = 0;
      for (long long b = 0; b < B; ++b) sum += static_cast<long long>(len[f * B + b]);
      start[s][f + 1] = start[s][f] + sum;
    }
  }
  long long first = 0;  // C(r)
  for (long long r = 0; r < W; ++r) {
    std::vector<double>& out_len = io.outputs[r][0].values;
    std::vector<double>& out_val = io.outputs[r][1].values;
    size_t at = 0;
    for (long long f = 0; f < features_of(r); ++f)
      for (long long s = 0; s < W; ++s) {
        const long long feature = first + f, row = f * W + s;
        for (long long b = 0; b < B; ++b) out_len[row * B + b] = io.inputs[s][0].values[feature * B + b];
        for (long long i = start[s][feature]; i < start[s][feature + 1]; ++i) out_val.at(at++) = io.inputs[s][1].values[i];
      }
    io.outputs[r][2].values[0] = static_cast<double>(W * B);
    for (long long s = 0; s < W; ++s) io.outputs[r][3].values[s] = static_cast<double>(B);
    first += features_of(r);
  }
}
