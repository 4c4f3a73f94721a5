// `pkb eval|run|sweep --profile DIR` on the driver's side (issue 23): the profile frames of a job's
// ranks become one side's profile, and the sides become files under DIR:
//   <stem>-<side>.trace.json    Chrome trace event format (opens in https://ui.perfetto.dev)
//   <stem>-<side>.summary.txt   profile::summary_text
//   <stem>-<side>.activity.json what the ranks recorded (profile::side_from_json reads it back)
//   <stem>.trace.json           every side of the run on one view
// (<stem> carries the step's name for a sweep: <problem>-<size>). What the activity says is the
// solution's process's word: it is shown, never believed; no verdict and no timing record reads it.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/job.hpp"
#include "profile/profile.hpp"

namespace pkb {

/// Refuses a --profile DIR that cannot be created or written, before anything runs: Error(invalid_argument).
void check_profile_dir(const std::string& dir);

/// How many calls --profile records per step.
inline constexpr int kProfileCalls = 5;
/// The most of a summary that goes into a record (and from there into an agent's prompt).
inline constexpr size_t kProfileTextBytes = 2048;

/// One side's profile, or why there is none.
struct SideOutcome {
  std::string label;
  std::optional<profile::SideProfile> side;
  std::string reason;  // when !side: "CUPTI ...: ...", "rank 1: malformed activity: ...", ...
};

/// Reads the ranks' profile frames of one step (StepResult::profile); `algbw_bytes` and `hbm_bytes`
/// (the spec's counts per call, 0: none) give the summary its bandwidths.
SideOutcome side_outcome(const std::string& label, const StepResult& step, int world, double algbw_bytes, double hbm_bytes);

/// The outcome of a job that ended before its profile phase.
inline SideOutcome side_missing(const std::string& label, const std::string& why) { return {label, std::nullopt, why}; }

/// Writes the files for `sides` under `dir` and returns what the record keeps (rec.profile):
/// {"dir", "merged", "sides": [{"label", "collected": true, "trace", "summary", "median_call_ms",
/// "text"} | {"label", "collected": false, "reason"}]}. A file that cannot be written is a reason too.
nlohmann::json write_profiles(const std::string& dir, const std::string& stem, const std::vector<SideOutcome>& sides);

/// The lines a terminal shows for rec.profile: the files, "profile not collected: <reason>" per
/// missing side, and where to open the traces.
std::string profile_lines(const nlohmann::json& profile);

}  // namespace pkb
