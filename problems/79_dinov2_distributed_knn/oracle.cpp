// CPU oracle for problem 79: for each rank r's query i, every train sample of every rank j (global
// index g = j NT + c) gets the similarity s = D(sum over f of q_r[i][f] t_j[f][c]) (in double, then
// rounded once to D as the GEMM's output is; the spec's ternary / 16 features make s an exact
// multiple of 1/256, so the rounding changes nothing in practice); rank r's row i is the K samples
// with the largest s, decreasing, equal s by lower g (the spec's tie rule, which PKB's two-level
// top-k also follows: lower column locally, lower rank in the merge), with their labels.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t Q = io.param("Q"), F = io.param("F"), NT = io.param("NT"), K = io.param("K");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  std::vector<std::pair<double, int64_t>> cand(static_cast<size_t>(W) * NT);  // (s, g)
  std::vector<double> row(NT);
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& q = io.inputs[r][0].values;  // [Q, F]
    for (size_t i = 0; i < Q; ++i) {
      for (int j = 0; j < W; ++j) {
        const std::vector<double>& t = io.inputs[j][1].values;  // [F, NT]
        std::fill(row.begin(), row.end(), 0.0);
        for (size_t f = 0; f < F; ++f) {
          const double qf = q[i * F + f];
          if (qf == 0.0) continue;
          const double* tf = &t[f * NT];
          for (size_t c = 0; c < NT; ++c) row[c] += qf * tf[c];
        }
        for (size_t c = 0; c < NT; ++c)
          cand[j * NT + c] = {pkb::round_to(d, row[c]), static_cast<int64_t>(j * NT + c)};
      }
      auto before = [](const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      };
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(K), cand.end(), before);
      for (size_t k = 0; k < K; ++k) {
        const int64_t g = cand[k].second;
        io.outputs[r][0].values[i * K + k] = cand[k].first;
        io.outputs[r][1].values[i * K + k] = io.inputs[g / NT][2].values[g % NT];
      }
    }
  }
}
