// CPU oracle for problem 10: rank s's output lists table[i] for its indices i, grouped by owner
// rank o = i / M in rank order and in input order within an owner (PKB's order, never restored).
#include <algorithm>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const long long W = io.world, M = io.param("M"), N = io.param("N");
  for (int s = 0; s < W; ++s) {
    const std::vector<double>& indices = io.inputs[s][0].values;
    std::vector<double>& out = io.outputs[s][0].values;
    long long row = 0;
    for (long long o = 0; o < W; ++o) {
      const std::vector<double>& shard = io.inputs[o][1].values;
      for (double v : indices) {
        long long idx = static_cast<long long>(v);
        if (idx / M != o) continue;
        long long local = std::clamp(idx - o * M, 0LL, M - 1);  // PKB's clamp (a no-op for these inputs)
        std::copy_n(shard.begin() + local * N, N, out.begin() + row * N);
        ++row;
      }
    }
  }
}
