#include "report/leaderboard.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/stats.hpp"
#include "report/metrics.hpp"

namespace pkb {

RunKey run_key(const ResultRow& r) { return {r.run, r.world, r.dtype, r.size}; }

Status Cell::shown() const {
  if (correct > 0) return Status::ok;
  Status best = Status::harness_error;
  int best_n = 0;
  for (auto& [s, n] : statuses)
    if (!is_not_attempt(s) && n > best_n) std::tie(best, best_n) = std::tie(s, n);
  return best;
}

double RunSummary::fast_at(double p) const { return fast_p(best_speedups, p); }

PreparedRows prepare_rows(std::vector<ResultRow> all) {
  PreparedRows out;
  out.read = all.size();
  using Key = std::tuple<RunKey, std::string, int>;
  std::map<Key, size_t> last;  // key -> index into `all` of the record that wins
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].kind != "eval") {
      ++out.not_eval;
      continue;
    }
    Key key{run_key(all[i]), all[i].problem, all[i].sample};
    auto [it, fresh] = last.emplace(key, i);
    if (!fresh) {
      out.replaced.push_back(all[i].run + " / " + all[i].problem + " / sample " + std::to_string(all[i].sample) + ": " +
                             all[it->second].source + " replaced by " + all[i].source);
      it->second = i;
    }
  }
  std::vector<bool> keep(all.size(), false);
  for (auto& [k, i] : last) keep[i] = true;
  for (size_t i = 0; i < all.size(); ++i)
    if (keep[i]) out.rows.push_back(std::move(all[i]));
  return out;
}

namespace {

void add_to_cell(Cell& c, const ResultRow& r) {
  ++c.statuses[r.status];
  if (is_not_attempt(r.status)) return;  // pkb's fault, or nothing this run could give: not an attempt
  ++c.samples;
  if (!r.oversubscribed) ++c.timed_samples;
  if (r.status != Status::ok) return;
  ++c.correct;
  if (r.oversubscribed) return;  // a verdict only: its timings are not performance
  if (r.speedup) {
    if (*r.speedup > 1.0) ++c.correct_faster;
    if (!c.best_speedup || *r.speedup > *c.best_speedup) c.best_speedup = r.speedup;
  }
  if (r.roofline_pct && (!c.roofline_pct || *r.roofline_pct > *c.roofline_pct)) c.roofline_pct = r.roofline_pct;
}

/// Mean over attempted cells of the unbiased estimator with "success" counted by `successes`.
template <typename Successes>
std::vector<KValue> mean_at_k(const RunSummary& run, const std::vector<int>& ks, Successes successes) {
  std::vector<KValue> out;
  for (int k : ks) {
    double sum = 0;
    for (auto& [stem, c] : run.cells)
      if (c.samples > 0) sum += pass_at_k(c.samples, successes(c), k);
    out.push_back({k, run.attempted ? sum / run.attempted : 0.0});
  }
  return out;
}

void summarize_run(RunSummary& run) {
  std::vector<double> speedups, rooflines;
  run.min_samples = 0;
  for (auto& [stem, c] : run.cells) {
    for (auto& [s, n] : c.statuses)
      if (s != Status::ok) run.failures[s] += n;
    if (c.samples == 0) continue;
    ++run.attempted;
    run.correct += c.correct > 0;
    run.min_samples = run.attempted == 1 ? c.samples : std::min(run.min_samples, c.samples);
    run.max_samples = std::max(run.max_samples, c.samples);
    if (c.timed_samples > 0) run.best_speedups.push_back(c.best_speedup);
    if (c.best_speedup) speedups.push_back(*c.best_speedup);
    if (c.roofline_pct) rooflines.push_back(*c.roofline_pct);
  }
  std::vector<int> ks = run.attempted ? pass_k_values(run.min_samples) : std::vector<int>{};
  run.pass_at = mean_at_k(run, ks, [](const Cell& c) { return c.correct; });
  run.fast1_at = mean_at_k(run, ks, [](const Cell& c) { return c.correct_faster; });
  run.timed_correct = static_cast<int>(speedups.size());
  run.geomean_speedup = geometric_mean(speedups);
  run.roofline_measured = static_cast<int>(rooflines.size());
  if (!rooflines.empty()) run.median_roofline_pct = percentile(rooflines, 0.5);
}

/// "label" where the label has one configuration, else "label (W=4 bf16 small)".
void name_runs(std::vector<RunSummary>& runs) {
  std::map<std::string, int> configs;
  for (auto& r : runs) ++configs[r.key.label];
  for (auto& r : runs) {
    r.name = r.key.label;
    if (configs[r.key.label] > 1) r.name += " (W=" + std::to_string(r.key.world) + " " + r.key.dtype + " " + r.key.size + ")";
  }
}

}  // namespace

Leaderboard build_leaderboard(const std::vector<ResultRow>& rows) {
  Leaderboard board;
  std::map<RunKey, size_t> index;
  std::map<std::string, int> problems;  // stem -> id
  for (auto& r : rows) {
    auto [it, fresh] = index.emplace(run_key(r), board.runs.size());
    if (fresh) board.runs.push_back(RunSummary{.key = run_key(r)});
    add_to_cell(board.runs[it->second].cells[r.problem], r);
    board.runs[it->second].oversubscribed += r.oversubscribed;
    problems.emplace(r.problem, r.problem_id);
  }
  std::set<int> ks;
  for (auto& run : board.runs) {
    summarize_run(run);
    for (auto& kv : run.pass_at) ks.insert(kv.k);
  }
  name_runs(board.runs);
  for (auto& [stem, id] : problems) board.problems.push_back({id, stem});
  std::sort(board.problems.begin(), board.problems.end(),
            [](const ProblemRef& a, const ProblemRef& b) { return std::tie(a.id, a.stem) < std::tie(b.id, b.stem); });
  board.k_values.assign(ks.begin(), ks.end());
  return board;
}

}  // namespace pkb
