// Leaderboard metrics as named pure functions (docs/reports.md gives the formulas):
//   pass_at_k          unbiased pass@k of one problem, 1 - C(n-c, k) / C(n, k)  (Chen et al. 2021)
//   fast_p             fraction of problems whose best correct speedup is > p   (KernelBench)
//   geometric_mean     of positive values, through logs
//   pass_k_values      which k a run with n samples per problem reports
#pragma once
#include <optional>
#include <vector>

namespace pkb {

/// Probability that at least one of k samples drawn without replacement from n samples, c of them
/// correct, is correct: 1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) so
/// that large n does not overflow. Requires 0 <= c <= n and 1 <= k <= n (Error otherwise).
double pass_at_k(int n, int c, int k);

/// Fraction of problems (one entry each) whose best correct speedup exceeds p. An entry without a
/// value (no correct sample, or a correct one that was not timed) never counts. 0 for no problems.
double fast_p(const std::vector<std::optional<double>>& best_speedup_per_problem, double p);

/// Geometric mean of positive values; nullopt for an empty list. Error for a value <= 0.
std::optional<double> geometric_mean(const std::vector<double>& values);

/// The k a run reports when every problem has at least `min_samples` samples: 1, 2, 3, 5, 10, 20,
/// 50, 100 up to min_samples, and min_samples itself.
std::vector<int> pass_k_values(int min_samples);

}  // namespace pkb
