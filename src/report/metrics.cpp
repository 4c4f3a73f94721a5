#include "report/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"

namespace pkb {

double pass_at_k(int n, int c, int k) {
  if (n < 1 || c < 0 || c > n || k < 1 || k > n)
    fail(Errc::invalid_argument, "pass@k needs 0 <= c <= n and 1 <= k <= n (n=" + std::to_string(n) + ", c=" + std::to_string(c) +
                                     ", k=" + std::to_string(k) + ")");
  // Every draw of k samples contains a correct one when fewer than k are wrong.
  if (n - c < k) return 1.0;
  // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i): a product of c factors below 1.
  double none_correct = 1.0;
  for (int i = n - c + 1; i <= n; ++i) none_correct *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - none_correct;
}

double fast_p(const std::vector<std::optional<double>>& best_speedup_per_problem, double p) {
  if (best_speedup_per_problem.empty()) return 0.0;
  size_t n = std::count_if(best_speedup_per_problem.begin(), best_speedup_per_problem.end(),
                           [p](const std::optional<double>& s) { return s && *s > p; });
  return static_cast<double>(n) / static_cast<double>(best_speedup_per_problem.size());
}

std::optional<double> geometric_mean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double log_sum = 0;
  for (double v : values) {
    if (!(v > 0)) fail(Errc::invalid_argument, "geometric mean of a non-positive value " + std::to_string(v));
    log_sum += std::log(v);
  }
  return std::exp(log_sum / static_cast<double>(values.size()));
}

std::vector<int> pass_k_values(int min_samples) {
  std::vector<int> out;
  for (int k : {1, 2, 3, 5, 10, 20, 50, 100})
    if (k <= min_samples) out.push_back(k);
  if (min_samples >= 1 && out.back() != min_samples) out.push_back(min_samples);
  return out;
}

}  // namespace pkb
