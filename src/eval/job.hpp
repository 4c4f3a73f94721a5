// Running one job (one solution on W ranks) from the driver: launch, send plans, collect messages
// under per-phase deadlines, and always end with every process of the job gone.
#pragma once
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "eval/gate.hpp"
#include "launch/launcher.hpp"
#include "proto/phase.hpp"
#include "proto/plan.hpp"

namespace pkb {

struct Deadlines {
  std::chrono::milliseconds setup{60'000};  // process start + NCCL init + solution load
  std::chrono::milliseconds init{120'000};  // pkb_init
  std::chrono::milliseconds trial{60'000};  // each correctness trial
  std::chrono::milliseconds timing{300'000};  // the whole timed phase
  std::chrono::milliseconds profile{60'000};  // --profile: CUPTI's start, the profiled calls, the flush
  std::chrono::milliseconds finalize{60'000};  // pkb_finalize
  std::chrono::milliseconds teardown{20'000};  // NCCL teardown after results are in (not charged)
  std::chrono::milliseconds grace{300};  // after a first failure, time to collect its cause
  /// The whole job, from the driver's clock: at most every phase at its limit back to back, and at
  /// most this when set (0: the sum alone).
  std::chrono::milliseconds job{0};
};

struct RankTrial {
  nlohmann::json meta;  // the trial message body
  std::vector<std::string> outputs;  // raw bytes per output
  std::vector<std::string> inputs;  // raw bytes per input (when requested)
};

struct RankTiming {
  nlohmann::json body;
  std::string samples;  // raw sample bytes, output after output
};

/// What a worker committed about one timed call the moment it ran, before the call's sample key was
/// revealed to it, with the driver's own clock around it (seconds since the job started).
struct CallCommit {
  double time_ms = 0;  // the call's device time as the worker measured it
  std::vector<std::string> digests;  // per output: fingerprint at return
  std::vector<unsigned long long> unwritten, nonfinite;  // per output, at return
  double granted_s = 0;  // the driver sent this call's seed
  double received_s = 0;  // the driver received this frame
};

/// What one step (one size) of a job produced.
struct StepResult {
  std::vector<std::vector<RankTrial>> trials;  // [trial][rank]
  std::vector<RankTiming> timing;  // [rank] (when timing ran)
  std::vector<RankTiming> graph;  // [rank] (graph replay timing, when asked for)
  std::vector<std::vector<CallCommit>> calls;  // [rank][timed call], committed as the calls ran
  std::vector<int> full_calls;  // the timed calls whose outputs came back whole
  /// [rank] the profile frame's body (--profile): {"step", "activity": RankProfile JSON} or
  /// {"step", "error": why not}; the solution's process's word, never part of a verdict.
  std::vector<nlohmann::json> profile;
  bool complete = false;  // every rank reached the step's end
};

struct JobResult {
  Status status = Status::ok;
  std::string message;
  int rank = -1;  // the rank the failure is charged to
  std::string phase;  // the phase it happened in
  int step = 0;  // the step it happened in
  std::vector<nlohmann::json> hello;  // per rank
  std::vector<StepResult> steps;
  double wall_s = 0;
  std::chrono::steady_clock::time_point started;  // the epoch of the commits' granted_s / received_s
  bool teardown_clean = true;
  std::string log_tail;  // the failing rank's log, last few KiB
  std::string containment;  // cgroup2, cgroup1 or process-group
  std::string sandbox;  // whom the workers ran as (Job::sandbox)
  bool isolated = false;  // not as the driver's user (Job::isolated)
  size_t leftover_processes = 0;  // processes the solution left behind after its workers ended
  /// Where the job's time went, by the driver's clock, for a job that ended ok: seconds per phase
  /// ("start" until setup is announced, "setup", "load", "init", "trials" for every trial together,
  /// "timing", "profile", "finalize", "teardown" until the worker exited), each the slowest rank's,
  /// in the order the phases ran; a sweep's steps add up. Empty after a failure.
  std::vector<std::pair<std::string, double>> phase_s;
};

struct JobConfig {
  LaunchRequest launch;
  std::vector<WorkerPlan> plans;  // one per rank
  Deadlines deadlines;
  /// Interleaved timing (eval/gate.hpp): the gate shared with the other job, and which side this
  /// job is (0: baseline, 1: candidate). Null: the job runs on its own.
  CallGate* gate = nullptr;
  int gate_side = 0;
  /// Called on every phase change of rank 0 (for progress display).
  std::function<void(int step, const Phase& phase)> on_phase;
};

/// Runs the job to completion or failure; never throws for anything the workers do, never leaves
/// a process behind. Throws Error only if the job cannot be launched at all.
JobResult run_job(Launcher& launcher, const JobConfig& cfg);

}  // namespace pkb
