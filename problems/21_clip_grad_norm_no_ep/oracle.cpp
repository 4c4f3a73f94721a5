// CPU oracle for problem 21: total_norm = sqrt(sum over ranks and the three gradients of ||g||^2) on
// every rank, in double. The baseline sums in fp32 (with a sqrt and square per gradient, as PKB's
// torch.norm(g) ** 2); the tolerance covers that.
#include <cmath>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  double sum = 0.0;
  for (int r = 0; r < io.world; ++r)
    for (const auto& g : io.inputs[r])
      for (double v : g.values) sum += v * v;
  const double total = std::sqrt(sum);
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values[0] = total;
}
