// CPU oracle for problem 30: output i of every rank is input i summed over all ranks, in double (the
// grid inputs make the sums exact in D as well).
#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  for (size_t i = 0; i < io.inputs[0].size(); ++i) {
    const size_t n = io.inputs[0][i].numel();
    for (size_t k = 0; k < n; ++k) {
      double s = 0.0;
      for (int r = 0; r < io.world; ++r) s += io.inputs[r][i].values[k];
      for (int r = 0; r < io.world; ++r) io.outputs[r][i].values[k] = s;
    }
  }
}
