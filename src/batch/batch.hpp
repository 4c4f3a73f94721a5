// Batch evaluation: `pkb eval --solutions DIR` evaluates every solution file in a directory,
// problem after problem, appending one record per evaluation to a results file.
//
//   1. discover   DIR/<stem>.cu (sample 0) and DIR/<stem>_s<k>.cu (sample k), stem a problem folder
//                 name; the naming `pkb generate` writes (solutions/<run>/<stem>_s<k>.cu)
//   2. plan       skip what the results file already holds with a final status (resumable)
//   3. run        one evaluation at a time through a BatchEvaluator, each record appended as soon as
//                 it exists; a failing evaluation never stops the batch, Ctrl-C does (records kept)
//
// The evaluator and the observer are interfaces, so the loop is tested without GPUs (a fake
// evaluator) and without a terminal (an observer writing to string streams).
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.hpp"
#include "report/record.hpp"
#include "spec/registry.hpp"

namespace pkb {

/// One solution file to evaluate.
struct BatchJob {
  ProblemEntry problem;
  std::filesystem::path solution;
  int sample = 0;
  std::string label;  // the run: --label, or DIR's name
  std::string sha256;  // of the solution file, for resuming
};

/// The configuration a problem is evaluated at, resolved before anything runs.
struct EvalConfig {
  int world = 0;
  std::string dtype, size;
};

class BatchEvaluator {
 public:
  virtual ~BatchEvaluator() = default;
  /// Where `problem` will be evaluated (world, dtype, resolved size name), without running
  /// anything. Throws Error when the problem cannot run at this configuration.
  virtual EvalConfig config_for(const ProblemEntry& problem) = 0;
  /// Evaluates one job and returns its record (the loop sets its label and sample and appends it).
  /// Throws Error when the evaluation could not be started, Interrupted on Ctrl-C.
  virtual EvalRecord evaluate(const BatchJob& job) = 0;
};

/// "1,2,7", "1_allreduce,allgather" or "all" (also empty) -> problems, in id order. Throws
/// Error(invalid_argument) naming an unknown problem (with "did you mean").
std::vector<ProblemEntry> select_problems(const std::vector<ProblemEntry>& all, const std::string& selection);

/// Which problem and sample a file name stands for: "<stem>.cu" -> (stem, 0), "<stem>_s<k>.cu"
/// -> (stem, k); nullopt for any other name or an unknown stem.
std::optional<std::pair<const ProblemEntry*, int>> parse_solution_name(const std::string& filename,
                                                                       const std::vector<ProblemEntry>& problems);

struct Discovered {
  std::vector<BatchJob> jobs;  // by problem id, then sample
  std::vector<std::string> ignored;  // .cu files that name no problem (typos show up here)
};

/// The jobs in `dir` for the `selected` problems (`all` names every problem, so that files of an
/// unselected problem are not reported as ignored). Throws Error(invalid_argument) when `dir` is
/// not a directory, when no file matches, or when two files claim one sample (x.cu and x_s0.cu).
Discovered discover_solutions(const std::filesystem::path& dir, const std::string& label, const std::vector<ProblemEntry>& all,
                              const std::vector<ProblemEntry>& selected);

/// "i/n" -> (i, n) with 0 <= i < n; throws Error(invalid_argument) otherwise.
std::pair<int, int> parse_shard(const std::string& text);

/// Shard i of n: every n-th job starting at i, in the discovered order (problem id, then sample).
/// Deterministic: the n shards of one directory are disjoint and together hold every job.
void keep_shard(Discovered& found, int index, int count);

/// An evaluation that is already done: problem, solution content, configuration, run and sample.
using DoneKey = std::tuple<std::string, std::string, int, std::string, std::string, std::string, int>;

/// Every finished evaluation in a results file (absent file: none). A record is finished when its
/// status is final: anything but harness_error (pkb's own failure is worth retrying).
std::set<DoneKey> finished_evaluations(const std::filesystem::path& results);

struct BatchPlan {
  std::vector<BatchJob> todo;
  std::vector<BatchJob> skipped;  // already in the results file
  std::vector<std::string> ignored;  // from discovery
};

/// Drops the jobs already finished. A job whose configuration cannot be resolved stays in the
/// plan; its evaluation will then report why it cannot run.
BatchPlan plan_batch(const Discovered& found, BatchEvaluator& evaluator, const std::set<DoneKey>& done);

struct BatchSummary {
  size_t planned = 0, skipped = 0, evaluated = 0, not_run = 0;
  std::map<Status, int> statuses;  // of the evaluated
  bool interrupted = false;
  std::filesystem::path results;
};

class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  virtual void planned(const BatchPlan& plan, const std::filesystem::path& results) = 0;
  virtual void started(size_t index, size_t total, const BatchJob& job) = 0;
  virtual void finished(size_t index, size_t total, const BatchJob& job, const EvalRecord& record) = 0;
  /// The evaluation could not be started (bad configuration for this problem, a pkb error).
  virtual void not_run(size_t index, size_t total, const BatchJob& job, const std::string& why) = 0;
  virtual void done(const BatchSummary& summary) = 0;
};

/// Runs the plan: each record is appended to `results` (JSON Lines) as soon as it exists.
/// Returns with interrupted set when Ctrl-C arrived; everything recorded before stays.
BatchSummary run_batch(const BatchPlan& plan, BatchEvaluator& evaluator, BatchObserver& observer,
                       const std::filesystem::path& results);

/// 0: every evaluation recorded; 3: some could not run or hit a harness error; 130: interrupted.
int batch_exit_code(const BatchSummary& s);

/// Lines on `out` (one per finished evaluation, a summary at the end) and, with `bar`, a progress
/// bar on `err` that each line replaces.
class ConsoleBatchObserver : public BatchObserver {
 public:
  ConsoleBatchObserver(std::ostream& out, std::ostream& err, bool bar) : out_(out), err_(err), bar_(bar) {}
  void planned(const BatchPlan& plan, const std::filesystem::path& results) override;
  void started(size_t index, size_t total, const BatchJob& job) override;
  void finished(size_t index, size_t total, const BatchJob& job, const EvalRecord& record) override;
  void not_run(size_t index, size_t total, const BatchJob& job, const std::string& why) override;
  void done(const BatchSummary& summary) override;

 private:
  void clear_bar();
  std::ostream& out_;
  std::ostream& err_;
  bool bar_;
};

}  // namespace pkb
