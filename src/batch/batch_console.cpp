// What a batch shows while it runs: one line per finished evaluation on stdout (kept in logs),
// and, on a terminal, a progress bar on stderr that each line overwrites.
#include <fmt/format.h>

#include "batch/batch.hpp"

namespace pkb {

namespace {

constexpr int kBarWidth = 24;

std::string counter(size_t index, size_t total) {
  int digits = static_cast<int>(std::to_string(total).size());
  return fmt::format("[{:>{}}/{}]", index + 1, digits, total);
}

std::string statuses_text(const std::map<Status, int>& statuses) {
  std::string s;
  for (auto& [st, n] : statuses) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, to_string(st));
  return s;
}

}  // namespace

void ConsoleBatchObserver::clear_bar() {
  if (bar_) err_ << "\r\033[K" << std::flush;
}

void ConsoleBatchObserver::planned(const BatchPlan& plan, const std::filesystem::path& results) {
  std::set<std::string> problems;
  for (auto& j : plan.todo) problems.insert(j.problem.stem);
  std::string label = !plan.todo.empty() ? plan.todo.front().label : !plan.skipped.empty() ? plan.skipped.front().label : "";
  out_ << fmt::format("pkb eval --solutions: {} evaluation{} of {} problem{} (run '{}'), records to {}\n", plan.todo.size(),
                      plan.todo.size() == 1 ? "" : "s", problems.size(), problems.size() == 1 ? "" : "s", label,
                      results.string());
  if (!plan.skipped.empty())
    out_ << fmt::format("  {} already evaluated (same problem, solution content, configuration and sample): skipped\n",
                        plan.skipped.size());
  if (!plan.ignored.empty()) {
    std::string names;
    for (auto& n : plan.ignored) names += (names.empty() ? "" : ", ") + n;
    out_ << "  ignored (no problem of that name): " << names << "\n";
  }
  out_.flush();
}

void ConsoleBatchObserver::started(size_t index, size_t total, const BatchJob& job) {
  if (!bar_) return;
  int filled = total ? static_cast<int>(kBarWidth * index / total) : 0;
  err_ << "\r\033[K[" << std::string(filled, '#') << std::string(kBarWidth - filled, '-') << "] " << index << "/" << total
       << " done, evaluating " << job.solution.filename().string() << std::flush;
}

void ConsoleBatchObserver::finished(size_t index, size_t total, const BatchJob& job, const EvalRecord& r) {
  clear_bar();
  std::string detail;
  if (r.status == Status::ok) detail = r.speedup ? fmt::format("{:.3f}x", *r.speedup) : "correct (not timed)";
  else detail = r.message.size() > 100 ? r.message.substr(0, 99) + "…" : r.message;
  out_ << fmt::format("{} {:<32} {:<14} {:<36} {:.1f} s\n", counter(index, total), job.solution.filename().string(),
                      to_string(r.status), detail, r.wall_s);
  out_.flush();
}

void ConsoleBatchObserver::not_run(size_t index, size_t total, const BatchJob& job, const std::string& why) {
  clear_bar();
  out_ << fmt::format("{} {:<32} not run: {}\n", counter(index, total), job.solution.filename().string(), why);
  out_.flush();
}

void ConsoleBatchObserver::done(const BatchSummary& s) {
  clear_bar();
  std::string what = fmt::format("{} evaluated{}", s.evaluated, s.statuses.empty() ? "" : " (" + statuses_text(s.statuses) + ")");
  if (s.not_run) what += fmt::format(", {} not run", s.not_run);
  if (s.skipped) what += fmt::format(", {} skipped as already done", s.skipped);
  if (s.interrupted)
    out_ << fmt::format("interrupted after {} of {}: {}; every record written so far is kept in {}\n", s.evaluated + s.not_run,
                        s.planned, what, s.results.string());
  else out_ << fmt::format("done: {}; records in {} (pkb report {})\n", what, s.results.string(), s.results.string());
  out_.flush();
}

}  // namespace pkb
