// CPU oracle for problem 85: every rank's values together, sorted ascending (S, T values); rank r's
// output is S[r base + min(r, extra), ... + base + (r < extra)) with base = T // W, extra = T % W.
// PKB's splitters, buckets and merges only decide which rank sorts which values: with a total order
// (value, rank, position) behind the tie-aware splitters, the result is this slice whatever they are.
#include <algorithm>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  std::vector<double> all;
  for (int r = 0; r < W; ++r) all.insert(all.end(), io.inputs[r][0].values.begin(), io.inputs[r][0].values.end());
  std::sort(all.begin(), all.end());
  const long long total = static_cast<long long>(all.size()), base = total / W, extra = total % W;
  for (int r = 0; r < W; ++r) {
    const long long start = r * base + std::min<long long>(r, extra);
    std::vector<double>& out = io.outputs[r][0].values;
    std::copy(all.begin() + start, all.begin() + start + static_cast<long long>(out.size()), out.begin());
  }
}
