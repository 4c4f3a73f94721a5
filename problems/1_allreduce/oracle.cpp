// CPU oracle for problem 1: out[r] = sum over ranks of tensor, for every rank r.
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  size_t n = io.inputs[0][0].numel();
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < io.world; ++r)
    for (size_t i = 0; i < n; ++i) sum[i] += io.inputs[r][0].values[i];
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = sum;
}
