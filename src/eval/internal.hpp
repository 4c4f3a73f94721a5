// Pieces shared by the run and eval flows (not part of the public interface).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eval/evaluator.hpp"
#include "eval/gate.hpp"
#include "eval/system.hpp"
#include "roofline/hardware.hpp"
#include "spec/oracle.hpp"
#include "spec/spec.hpp"

namespace pkb::detail {

struct Prepared {
  Spec spec;
  Instance inst;
  SystemInfo sys;
  uint64_t seed = 0;
  std::filesystem::path solution_path;  // resolved candidate source
  bool solution_is_reference = false;
  std::optional<HardwareFacts> calibration;  // this machine's `pkb calibrate`, if any
  Placement placement;  // which GPU each rank takes
};

/// The checks of prepare() that need neither the spec nor the GPUs: the solution file, the dtype's
/// name, counts, and the timeout. Throws Error(invalid_argument).
void check_eval_options(const EvalOptions& opts);

/// Resolves the problem, sizes, dtype and GPU count; throws on bad input. Everything that can be
/// checked without GPUs (problem, solution file, options, the size class and `size_classes`, a
/// sweep's list where "all" stands for every class) is checked before the GPUs are probed.
/// `check` sees the loaded spec before any GPU is probed (bad input is refused without a GPU).
Prepared prepare(const EvalOptions& opts, const std::vector<std::string>& size_classes = {},
                 const std::function<void(const Spec&)>& check = {});

/// Record fields common to every flow, for one instance.
EvalRecord start_record(const EvalOptions& opts, const Prepared& p, const Instance& inst, const char* kind);

/// Compiles one side; on failure fills the record (compile_error / load_error) and returns false.
bool compile_side(const EvalOptions& opts, const std::filesystem::path& src, SideInfo& side, EvalRecord& rec,
                  std::string& so_path, bool is_baseline);

/// One configuration a job runs (eval: one; sweep: one per size).
struct Step {
  const Instance* inst = nullptr;
  std::string name;
  uint64_t seed = 0;
  int trials = 1;
  TimingPlan timing;
  int profile_calls = 0;  // --profile
};

/// The timing plan for an instance (warm-up, timed calls, checks).
TimingPlan timing_plan(const EvalOptions& opts, const Prepared& p, const Instance& inst, bool enabled);

/// Plans for every rank of one job.
std::vector<WorkerPlan> make_plans(const Prepared& p, const std::vector<Step>& steps, const std::string& so_path,
                                   const std::string& role, bool send_inputs);

/// Runs one side's job; with a gate, as `side` of an interleaved pair (eval/gate.hpp).
/// The confinement the runners apply (proc/confine.hpp): Landlock wherever the kernel has it and
/// PKB_SANDBOX is not off.
Confinement runner_confinement();
/// The record's isolation once the runners' confinement is known: `sandbox` names it, and a
/// confined job counts as isolated whoever its workers ran as.
void note_confinement(JobResult& res, const Confinement& c);

JobResult run_side(const EvalOptions& opts, const Prepared& p, std::vector<WorkerPlan> plans, const std::string& label,
                   CallGate* gate = nullptr, int side = 0);

// checks.cpp
/// Checks a job's own outputs (written, finite, stable after return, inputs untouched).
void check_sanity(const Instance& inst, const StepResult& job, EvalRecord& rec);
/// Compares the candidate's trial outputs with the baseline's.
void check_trials(const Instance& inst, const StepResult& base, const StepResult& cand, EvalRecord& rec);
/// Compares every timed call of the candidate with the same call of the baseline.
void check_timed_calls(const Instance& inst, const StepResult& base, const StepResult& cand, EvalRecord& rec);
/// Compares trial outputs with the CPU oracle (needs inputs in the job result).
void check_oracle(const Instance& inst, uint64_t seed, const StepResult& job, EvalRecord& rec);
/// The same with a given oracle (tests; check_oracle finds the problem's own).
void check_oracle_with(OracleFn fn, const Instance& inst, uint64_t seed, const StepResult& job, EvalRecord& rec);
/// The bytes of input `i` of rank `r` in correctness trial `t`, generated on the CPU exactly as the
/// workers generate them on the GPU.
std::string generate_input(const TensorPlan& tp, uint64_t seed, uint64_t trial, int rank, size_t i);
/// Per-iteration slowest-rank times and plausibility of one side's timing.
SideTiming summarize_timing(const StepResult& job, EvalRecord& rec, const std::string& label);
/// Flags a candidate whose per-call overhead on the driver's clock is far above the baseline's.
void compare_overheads(EvalRecord& rec, bool oversubscribed);
/// Sets status and message from the first failed check (if any).
void conclude_checks(EvalRecord& rec);
/// Fills rec.roofline from the candidate's median time and flags physically impossible times.
void attach_roofline(const Prepared& p, const Instance& inst, EvalRecord& rec);
/// Applies a failed job to the record (a failing baseline is a harness error).
void apply_job_failure(const JobResult& job, EvalRecord& rec, bool is_baseline);

/// With --interleave the baseline's job failed (`beside`) while the candidate's (`cand`) ran next
/// to it on the same GPUs, and then ran again alone (`alone`). If it passed alone the candidate's
/// job is to blame: the candidate's own failure if it has one (the interference in a warning),
/// else `flagged`; returns false, changing nothing, if it failed alone as well (pkb's problem).
bool charge_interference(const JobResult& beside, const JobResult& alone, const JobResult& cand, EvalRecord& rec);
/// --profile: one side's job by its label; null: it never ran.
using ProfiledJob = std::pair<std::string, const JobResult*>;
/// --profile DIR: writes the profiles of `jobs`' step `step` under DIR and sets rec.profile
/// (eval/profile_out.hpp); a side without one gets its reason. Nothing without --profile.
void attach_profiles(const EvalOptions& opts, const Instance& inst, const std::string& stem, const std::vector<ProfiledJob>& jobs,
                     EvalRecord& rec, size_t step = 0);
/// Wall time, clears the progress line, appends the JSON line if asked.
void finish_record(const EvalOptions& opts, EvalRecord& rec, Clock::time_point t0);

// dump.cpp
void dump_artifacts(const std::string& dir, const Prepared& p, const Instance& inst, uint64_t seed, const StepResult& job,
                    const std::string& side);

}  // namespace pkb::detail
