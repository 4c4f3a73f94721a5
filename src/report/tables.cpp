#include "report/tables.hpp"

#include <fmt/format.h>

#include <set>

namespace pkb {

Tone tone_of(Status s) {
  switch (s) {
    case Status::ok: return Tone::slow;
    case Status::compile_error:
    case Status::load_error: return Tone::build;
    case Status::runtime_error:
    case Status::crash:
    case Status::timeout:
    case Status::protocol_error: return Tone::runtime;
    case Status::mismatch: return Tone::wrong;
    case Status::flagged: return Tone::flagged;
    case Status::harness_error:
    case Status::unsupported: return Tone::harness;
  }
  return Tone::plain;
}

const char* tone_name(Tone t) {
  switch (t) {
    case Tone::plain: return "plain";
    case Tone::fast: return "fast";
    case Tone::slow: return "slow";
    case Tone::build: return "build";
    case Tone::runtime: return "runtime";
    case Tone::wrong: return "wrong";
    case Tone::flagged: return "flagged";
    case Tone::harness: return "harness";
    case Tone::absent: return "absent";
  }
  return "plain";
}

namespace {

std::string fraction(double v, NumberStyle style) {
  return style == NumberStyle::exact ? fmt::format("{}", v) : fmt::format("{:.3f}", v);
}

std::string speedup_text(std::optional<double> v, NumberStyle style) {
  if (!v) return style == NumberStyle::exact ? "" : "-";
  return style == NumberStyle::exact ? fmt::format("{}", *v) : fmt::format("{:.2f}x", *v);
}

std::string percent_text(std::optional<double> v, NumberStyle style) {
  if (!v) return style == NumberStyle::exact ? "" : "-";
  return style == NumberStyle::exact ? fmt::format("{}", *v) : fmt::format("{:.1f}", *v);
}

/// The value for k in a run's list, or "-" where the run has too few samples for k.
std::string at_k(const std::vector<KValue>& values, int k, NumberStyle style) {
  for (auto& kv : values)
    if (kv.k == k) return fraction(kv.value, style);
  return style == NumberStyle::exact ? "" : "-";
}

std::string p_label(double p) { return fmt::format("fast_{}", p); }

std::string config_text(const RunKey& k) { return fmt::format("W={} {} {}", k.world, k.dtype, k.size); }

}  // namespace

Table summary_table(const Leaderboard& board, NumberStyle style) {
  Table t{"summary", "Leaderboard", {}, {}, {}};
  // One configuration for every run: said once in the note rather than repeated in a column.
  std::set<std::string> configs;
  for (auto& run : board.runs) configs.insert(config_text(run.key));
  bool config_column = configs.size() > 1 || style == NumberStyle::exact;  // machine readers get fixed columns
  t.header = {"run"};
  if (config_column) t.header.push_back("config");
  t.header.insert(t.header.end(), {"problems", "correct", "samples"});
  bool several = board.k_values.size() > 1;
  for (int k : board.k_values) t.header.push_back(fmt::format("pass@{}", k));
  if (several)
    for (int k : board.k_values) t.header.push_back(fmt::format("fast_1@{}", k));
  for (double p : kFastPs) t.header.push_back(p_label(p));
  t.header.insert(t.header.end(), {"geomean speedup", "median roofline %"});
  for (auto& run : board.runs) {
    std::vector<TableCell> row;
    auto add = [&](std::string s) { row.push_back({std::move(s), Tone::plain}); };
    add(run.name);
    if (config_column) add(config_text(run.key));
    add(std::to_string(run.attempted));
    add(std::to_string(run.correct));
    add(run.min_samples == run.max_samples ? std::to_string(run.min_samples)
                                           : fmt::format("{}-{}", run.min_samples, run.max_samples));
    for (int k : board.k_values) add(at_k(run.pass_at, k, style));
    if (several)
      for (int k : board.k_values) add(at_k(run.fast1_at, k, style));
    for (double p : kFastPs) add(fraction(run.fast_at(p), style));
    add(speedup_text(run.geomean_speedup, style));
    add(percent_text(run.median_roofline_pct, style));
    t.rows.push_back(std::move(row));
  }
  t.note =
      "pass@k: unbiased estimator over each problem's samples; fast_p: share of problems whose best correct "
      "sample is more than p times faster than the baseline; geomean over those best correct speedups.";
  if (!config_column && configs.size() == 1) t.note = "All runs at " + *configs.begin() + ". " + t.note;
  int oversubscribed = 0;
  for (auto& run : board.runs) oversubscribed += run.oversubscribed;
  if (oversubscribed > 0)
    t.note += fmt::format(
        " {} record(s) ran with ranks sharing GPUs (--oversubscribe): counted for pass@k, left out "
        "of speedup, fast_p and roofline figures.",
        oversubscribed);
  return t;
}

Table failures_table(const Leaderboard& board) {
  std::set<Status> seen;
  for (auto& run : board.runs)
    for (auto& [s, n] : run.failures) seen.insert(s);
  Table t{"failures", "Failures (records per status)", {"run"}, {}, {}};
  for (Status s : seen) t.header.push_back(std::string(to_string(s)));
  t.header.push_back("total");
  for (auto& run : board.runs) {
    if (run.failures.empty()) continue;
    std::vector<TableCell> row{{run.name, Tone::plain}};
    int total = 0;
    for (Status s : seen) {
      auto it = run.failures.find(s);
      int n = it == run.failures.end() ? 0 : it->second;
      total += n;
      row.push_back({std::to_string(n), n ? tone_of(s) : Tone::plain});
    }
    row.push_back({std::to_string(total), Tone::plain});
    t.rows.push_back(std::move(row));
  }
  if (seen.count(Status::harness_error))
    t.note = "harness_error is pkb's own failure: it is listed but not counted as an attempt of the candidate.";
  if (seen.count(Status::unsupported))
    t.note += std::string(t.note.empty() ? "" : " ") +
              "unsupported: the solution asked for what its run could not give (symmetric memory with --oversubscribe); "
              "listed, not counted as an attempt.";
  return t;
}

TableCell matrix_cell(const Cell* c) {
  if (!c) return {"-", Tone::absent};
  Status shown = c->shown();
  TableCell cell{std::string(to_string(shown)), tone_of(shown)};
  if (c->samples > 1) cell.text = fmt::format("{}/{} {}", c->correct, c->samples, cell.text);
  if (shown == Status::ok && c->best_speedup) {
    cell.text += fmt::format(" {:.2f}x", *c->best_speedup);
    if (*c->best_speedup > 1.0) cell.tone = Tone::fast;
  }
  return cell;
}

Table matrix_table(const Leaderboard& board) {
  Table t{"matrix", "Problems x runs", {"problem"}, {}, {}};
  for (auto& run : board.runs) t.header.push_back(run.name);
  for (auto& p : board.problems) {
    std::vector<TableCell> row{{p.stem, Tone::plain}};
    for (auto& run : board.runs) {
      auto it = run.cells.find(p.stem);
      row.push_back(matrix_cell(it == run.cells.end() ? nullptr : &it->second));
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "A cell shows the status (correct/samples where a run has several samples) and the best correct speedup; "
      "'-' means the run has no record for the problem.";
  return t;
}

}  // namespace pkb
