// CPU oracle for problem 6: the root stacks every rank's tensor; the others return their input.
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  int root = static_cast<int>(io.param("root"));
  size_t n = io.inputs[0][0].numel();
  for (int r = 0; r < io.world; ++r) {
    if (r != root) {
      io.outputs[r][0].values = io.inputs[r][0].values;
      continue;
    }
    for (int s = 0; s < io.world; ++s)
      for (size_t i = 0; i < n; ++i) io.outputs[r][0].values[s * n + i] = io.inputs[s][0].values[i];
  }
}
