// CPU oracle for problem 34: every rank's output is the row concatenation of all ranks' x.
#include <algorithm>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  for (int r = 0; r < io.world; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;  // [W M, N]
    size_t at = 0;
    for (int j = 0; j < io.world; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;  // [M, N]
      std::copy(x.begin(), x.end(), out.begin() + at);
      at += x.size();
    }
  }
}
