// Summary statistics of timing samples, as named functions.
#pragma once
#include <cstddef>
#include <vector>

namespace pkb {

struct Summary {
  size_t n = 0;
  double median = 0, mean = 0, p10 = 0, p90 = 0, min = 0, max = 0, stddev = 0;
};

/// Percentile by linear interpolation between closest ranks (q in [0, 1]).
double percentile(std::vector<double> values, double q);
Summary summarize(const std::vector<double>& values);

/// Per-iteration maximum over ranks: per_rank[r][i] -> out[i]. All ranks must have equal length.
std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& per_rank);

}  // namespace pkb
