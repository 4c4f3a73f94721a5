// The aggregate behind `pkb report`: records grouped into runs, one cell per run and problem, and
// each run's leaderboard metrics. Computed once from plain rows; every reporter renders this same
// value (reporters never compute metrics themselves).
//
// A run is a label at one configuration (world, dtype, size); records of one label at two
// configurations are two runs, named "label (W=4 bf16 small)". Only `pkb eval` records count
// (a `pkb run` has no baseline; a `pkb sweep` record is one size of a sweep). Same run, problem
// and sample twice: the later record wins.
#pragma once
#include <compare>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "report/results.hpp"

namespace pkb {

/// The p of the fast_p columns (the HTML curve sweeps 0..3 continuously).
inline constexpr double kFastPs[] = {0.0, 1.0, 1.5, 2.0};

struct RunKey {
  std::string label;
  int world = 0;
  std::string dtype, size;
  auto operator<=>(const RunKey&) const = default;
};

/// One run on one problem: its samples summed up.
struct Cell {
  int samples = 0;  // attempts charged to the candidate: every status but harness_error
  int correct = 0;  // status ok
  int correct_faster = 0;  // ok with speedup > 1 (for fast_1@k)
  std::map<Status, int> statuses;  // every record, harness errors included
  std::optional<double> best_speedup;  // the best correct, timed sample
  std::optional<double> roofline_pct;  // the highest among correct samples
  int timed_samples = 0;  // attempts whose timings count (not --oversubscribe)
  /// ok when a sample is correct, else the most frequent failure (harness_error only if alone).
  Status shown() const;
};

struct KValue {
  int k = 0;
  double value = 0;
};

struct RunSummary {
  std::string name;  // label, or "label (W=.. dtype size)" where the label has several configs
  RunKey key;
  std::map<std::string, Cell> cells;  // by problem stem
  int attempted = 0;  // problems with at least one charged sample
  int correct = 0;  // problems with at least one correct sample
  int min_samples = 0, max_samples = 0;
  std::vector<KValue> pass_at;  // mean over attempted problems of pass_at_k(n, c, k)
  std::vector<KValue> fast1_at;  // the same with "correct and speedup > 1"
  std::vector<std::optional<double>> best_speedups;  // one per attempted problem, for fast_p
  std::optional<double> geomean_speedup;  // over problems' best correct speedups
  int timed_correct = 0;  // problems those came from
  std::optional<double> median_roofline_pct;
  int roofline_measured = 0;
  std::map<Status, int> failures;  // records per failing status
  /// Records that ran with ranks sharing GPUs (--oversubscribe): counted for pass@k, left out of
  /// speedups, fast_p and roofline figures (a problem only they attempted has no fast_p entry).
  int oversubscribed = 0;
  /// fast_p of this run at any p (see metrics.hpp).
  double fast_at(double p) const;
};

struct ProblemRef {
  int id = 0;
  std::string stem;
};

struct Leaderboard {
  std::vector<RunSummary> runs;  // in order of first appearance
  std::vector<ProblemRef> problems;  // every problem any run has a record for, by id
  std::vector<int> k_values;  // the union of the runs' pass@k k's
};

/// What was read and what was set aside, before aggregation.
struct PreparedRows {
  std::vector<ResultRow> rows;  // eval records, duplicates removed, in input order
  size_t read = 0;  // records read
  size_t not_eval = 0;  // records of other kinds (run, sweep, full_part) left out
  std::vector<std::string> replaced;  // "run / problem / sample k: a.jsonl:3 replaced by b.jsonl:9"
};

/// Keeps `pkb eval` records and drops all but the last of each (run, problem, sample).
PreparedRows prepare_rows(std::vector<ResultRow> all);

/// Groups rows into runs and computes every metric. Rows must be prepared (no duplicates).
Leaderboard build_leaderboard(const std::vector<ResultRow>& rows);

/// The run key of a row (its label at its configuration).
RunKey run_key(const ResultRow& r);

}  // namespace pkb
