// CPU oracle for problem 27: rank r's output is, for j = 0 .. W-1 in order, the input_splits_j[r]
// rows that rank j sends to r (rank j's rows from offset input_splits_j[0] + ... + input_splits_j[r-1]).
#include <algorithm>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long N = io.param("N");
  for (int r = 0; r < W; ++r) {
    std::vector<double>& out = io.outputs[r][0].values;
    long long row = 0;
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& x = io.inputs[j][0].values;
      const std::vector<double>& send = io.inputs[j][1].values;  // rank j's input_splits
      long long off = 0;
      for (int k = 0; k < r; ++k) off += static_cast<long long>(send[k]);
      long long count = static_cast<long long>(send[r]);
      std::copy_n(x.begin() + off * N, count * N, out.begin() + row * N);
      row += count;
    }
  }
}
