#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"

namespace pkb {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Summary summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = percentile(v, 0.5);
  s.p10 = percentile(v, 0.1);
  s.p90 = percentile(v, 0.9);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& per_rank) {
  if (per_rank.empty()) return {};
  size_t n = per_rank[0].size();
  for (auto& r : per_rank)
    if (r.size() != n) fail(Errc::protocol_error, "ranks reported different numbers of timed iterations");
  std::vector<double> out(n, 0.0);
  for (auto& r : per_rank)
    for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], r[i]);
  return out;
}

}  // namespace pkb
