// CPU oracle for problem 4: the root gets the sum over ranks; every other rank its own input.
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  int root = static_cast<int>(io.param("root"));
  size_t n = io.inputs[0][0].numel();
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = io.inputs[r][0].values;
  std::vector<double>& sum = io.outputs[root][0].values;
  for (size_t i = 0; i < n; ++i) {
    sum[i] = 0.0;
    for (int r = 0; r < io.world; ++r) sum[i] += io.inputs[r][0].values[i];
  }
}
