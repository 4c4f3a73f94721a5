// CPU oracle for problem 82: per flat token t, its whole boosted vocabulary row in double, sorted
// ascending (stable: lower vocabulary index first), top-k then top-p filtered, and the target's
// log-softmax; the same [B, S] result on every rank. The probabilities and their running sums are
// rounded to D as PyTorch stores them (the sums accumulate in double in sorted order, not in D in
// PyTorch's tree order: the inputs make the top-p cut insensitive to that, see spec.toml).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "spec/oracle.hpp"

namespace {

// The target's log-probability of one vocabulary row (already boosted) under the filter.
double filtered_log_prob(pkb::Narrow d, const std::vector<double>& x, long long target, long long top_k) {
  const size_t V = x.size();
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  const double thr = x[order[V - static_cast<size_t>(top_k)]];
  const double mx = x[order[V - 1]];
  double sum = 0.0;
  for (size_t v = 0; v < V; ++v)
    if (x[v] >= thr) sum += std::exp(x[v] - mx);
  const double cut = pkb::round_to(d, 1.0 - 0.9);
  std::vector<bool> keep(V, false);
  double run = 0.0;
  for (size_t i = 0; i < V; ++i) {
    size_t v = order[i];
    bool keep_k = x[v] >= thr;
    run += keep_k ? pkb::round_to(d, std::exp(x[v] - mx) / sum) : 0.0;
    keep[v] = keep_k && (pkb::round_to(d, run) > cut || i == V - 1);
  }
  double kept = 0.0;
  for (size_t v = 0; v < V; ++v)
    if (keep[v]) kept += std::exp(x[v] - mx);
  size_t t = static_cast<size_t>(target);
  return keep[t] ? (x[t] - mx) - std::log(kept) : -INFINITY;
}

}  // namespace

PKB_ORACLE(io) {
  const auto& shape = io.inputs[0][0].shape;  // [B, S, V / W]
  const size_t tokens = static_cast<size_t>(shape[0] * shape[1]);
  const size_t cols = static_cast<size_t>(shape[2]);
  const size_t V = cols * static_cast<size_t>(io.world);
  const double boost = static_cast<double>(io.param("boost"));
  const long long top_k = io.param("top_k");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  const std::vector<double>& target = io.inputs[0][1].values;
  std::vector<double> out(tokens), row(V);
  for (size_t t = 0; t < tokens; ++t) {
    long long tgt = static_cast<long long>(target[t]);
    for (size_t v = 0; v < V; ++v) {
      double x = io.inputs[v / cols][0].values[t * cols + v % cols];
      row[v] = pkb::round_to(d, x + (static_cast<long long>(v) == tgt ? boost : 0.0));
    }
    out[t] = filtered_log_prob(d, row, tgt, top_k);
  }
  for (int r = 0; r < io.world; ++r) io.outputs[r][0].values = out;
}
