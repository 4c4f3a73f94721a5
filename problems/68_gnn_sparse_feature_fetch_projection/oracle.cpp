// CPU oracle for problem 68: out[r][i] = table[ids_r[i]] @ P_r, where the table row of global id g
// is row g - o S of rank o's shard, o = min(g // S, W - 1) (PKB's clamp), and P_r is rank r's own
// proj_matrix. The fetch copies D values exactly, so only the GEMM is computed (in double; the
// tolerance covers the baseline's one rounding to D). Holding every shard in double, it is meant for
// the tiny and small classes.
#include <algorithm>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long S = io.param("S"), E = io.param("E"), O = io.param("O");
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& ids = io.inputs[r][1].values;
    const std::vector<double>& P = io.inputs[r][2].values;
    std::vector<double>& out = io.outputs[r][0].values;
    for (size_t i = 0; i < ids.size(); ++i) {
      const long long g = static_cast<long long>(ids[i]);
      const long long o = std::min<long long>(g / S, W - 1);
      const double* row = io.inputs[o][0].values.data() + (g - o * S) * E;
      double* c = out.data() + i * O;
      for (long long k = 0; k < E; ++k) {
        const double a = row[k];
        const double* p = P.data() + k * O;
        for (long long n = 0; n < O; ++n) c[n] += a * p[n];
      }
    }
  }
}
