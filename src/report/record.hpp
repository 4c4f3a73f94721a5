// The result of one `pkb run` or `pkb eval`: a plain record that every reporter (terminal, JSON
// Lines, later Markdown/CSV/HTML) renders. A failure is a record with a status and a reason, never
// an abort. JSON carries schema_version, independent of the harness version.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/stats.hpp"
#include "core/status.hpp"

namespace pkb {

inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kHarnessVersion = "0.1.0";

struct SideTiming {
  bool measured = false;
  Summary us;  // per-iteration time, slowest rank, microseconds
  std::vector<double> per_iter_us;
  int warmup = 0, iters = 0, groups = 0;
  double span_ms = 0, host_ms = 0;  // GPU span of the timed calls (rank max) and host wall clock
  /// Median over timed calls of the driver's clock around the call minus the call's time (-1: not
  /// measured): the harness's own per-call cost, the same for every honest solution of a problem.
  double driver_overhead_us = -1;
};

struct Check {
  std::string what;  // "trial 2 rank 1 output 'out'" or "timed calls rank 0 output 'out'"
  bool ok = true;
  Status status = Status::mismatch;  // what a failure of this check means (mismatch or flagged)
  std::string message;  // on failure: what is wrong
  nlohmann::json detail;
};

struct SideInfo {
  std::string label;  // "baseline", "candidate"
  std::string path;  // source file
  std::string sha256;
  bool compile_cached = false;
  double compile_s = 0;
  double job_wall_s = 0;
  bool teardown_clean = true;
  /// The job's seconds per phase, the slowest rank's (JobResult::phase_s); empty if it failed.
  std::vector<std::pair<std::string, double>> phase_s;
};

/// One cell of `pkb eval --full` (eval/full.hpp) as its summary record lists it in `full`.
struct FullCell {
  enum class State {
    ran,  // evaluated: `status` is its verdict
    refused,  // not run: the spec's world range or a constraint, or the machine, does not allow it
    skipped,  // not run: the solution failed to build at another cell, and would fail the same way here
  };
  int world = 0;
  std::string dtype, size;
  State state = State::ran;
  Status status = Status::ok;  // when ran
  std::string message;  // the cell's record message; when not run, why
  /// "W=4 fp16 small": how progress lines and summary messages name a cell.
  std::string name() const;
  /// The status as records write it: the verdict's name when it ran, else "refused" or "skipped".
  std::string status_text() const;
};

nlohmann::json to_json(const FullCell& c);
/// A `full` entry read back; nullopt when it lacks world, dtype, size or a known status.
std::optional<FullCell> full_cell_from_json(const nlohmann::json& j);

struct EvalRecord {
  /// "eval", "run", "sweep" (one size of a sweep) or "full_part" (one cell of `pkb eval --full`;
  /// its summary is an "eval" record with `full` set)
  std::string kind = "eval";
  std::string timestamp;  // ISO 8601, UTC
  std::vector<std::string> argv;

  int problem_id = 0;
  std::string problem_stem, problem_name, spec_hash;

  SideInfo baseline, candidate;
  std::string label;  // the solution set this candidate belongs to (e.g. a model's run name)
  int sample = 0;  // sample index within the set, for pass@k

  int world = 0;
  std::string dtype, size_name;
  nlohmann::json params = nlohmann::json::object();  // W, M, N, ... as resolved
  int trials = 0;
  double atol = 0, rtol = 0;
  std::string seed;  // revealed after the run, for reproduction
  bool oversubscribed = false;  // W ranks on fewer GPUs: timings are not performance
  int ranks_per_gpu = 1, gpus_used = 0;

  nlohmann::json system = nlohmann::json::object();
  std::string containment;  // how the candidate's job was contained: cgroup2, cgroup1, process-group
  std::string sandbox;  // whom the candidate's workers ran as (launcher.hpp Job::sandbox)

  Status status = Status::ok;
  std::string message;
  int failed_rank = -1;
  std::string failed_phase;
  std::string compile_log;  // on compile_error
  std::string log_tail;  // the failing rank's output

  std::vector<Check> checks;  // every failed check (passed ones are only counted)
  size_t checks_passed = 0;
  /// Records one check: passes are counted, failures kept with their reason.
  void add_check(bool ok, std::string what, std::string message = {}, nlohmann::json detail = nullptr,
                 Status failure_status = Status::mismatch);
  bool any_failed() const { return !checks.empty(); }

  SideTiming baseline_timing, candidate_timing;
  std::optional<double> speedup;
  /// Interleaved timing (pkb eval --interleave R): {round, rounds, lo, hi, bound, unstable}: the
  /// speedup is the median of per-round ratios, [lo, hi] its 95 % interval (null without 6 rounds);
  /// null when the two jobs ran one after the other.
  nlohmann::json interleaved = nullptr;
  /// Roofline of the candidate (see docs/performance.md): floor_us, pct (floor / measured),
  /// the byte and FLOP counts it came from; null when not computed.
  nlohmann::json roofline = nullptr;
  /// CUDA-graph replay timing when asked for (sweep --graph): {baseline_us, candidate_us}.
  nlohmann::json graph_timing = nullptr;
  std::optional<bool> bitwise_identical;  // candidate outputs equal the baseline's bit for bit
  std::vector<std::string> warnings;
  /// `pkb eval --full`'s summary: every cell of the matrix with its sub-verdict (written only when
  /// not empty).
  std::vector<FullCell> full;
  /// --profile DIR (eval/profile_out.hpp): the files written per side, each side's median profiled
  /// call and summary text, or "collected": false with the reason; null without --profile. Nothing
  /// here enters the verdict: it is what the profiled calls showed, after the timed ones.
  nlohmann::json profile = nullptr;

  double wall_s = 0;
};

nlohmann::json to_json(const EvalRecord& r);

/// Current time as ISO 8601 UTC.
std::string now_iso8601();

}  // namespace pkb
