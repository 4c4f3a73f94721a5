// CPU oracle for problem 67: rank r receives, from every rank s in order, the pairs (idx[i], value[i])
// with idx[i] % W == r, in the order of i (a stable sort by owner).
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world, N = io.param("N"), H = io.param("H");
  for (long long r = 0; r < W; ++r) {
    std::vector<double>& out_idx = io.outputs[r][0].values;
    std::vector<double>& out_val = io.outputs[r][1].values;
    size_t at = 0;
    for (long long s = 0; s < W; ++s) {
      const std::vector<double>& idx = io.inputs[s][0].values;
      const std::vector<double>& val = io.inputs[s][1].values;
      for (long long i = 0; i < N; ++i) {
        if (static_cast<long long>(idx[i]) % W != r) continue;
        out_idx.at(at) = idx[i];
        for (long long h = 0; h < H; ++h) out_val.at(at * H + h) = val[i * H + h];
        ++at;
      }
    }
  }
}
