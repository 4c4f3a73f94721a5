// The two evaluation flows:
//   run  (PKB's "dryrun"): one solution alone; outputs checked for sanity (written, finite, stable,
//        inputs untouched) and, with an oracle, for correctness; optional timing.
//   eval (PKB's "eval"): baseline and candidate as separate jobs on the same secret inputs; every
//        output of every trial and every timed call compared; speedup from the same run.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build/compiler.hpp"
#include "eval/job.hpp"
#include "launch/launcher.hpp"
#include "report/record.hpp"

namespace pkb {

/// How a job's workers start: `local` forks and execs them here, `mpi` has mpirun/srun start them
/// (they join the driver over TCP, docs/multi-node.md).
enum class LauncherKind { local, mpi };

struct EvalOptions {
  std::string problem;
  std::string solution;  // a .cu path; "reference" (or "baseline") = the problem's reference.cu
  int gpus = 0;  // 0: every visible GPU
  /// W ranks on fewer GPUs (round-robin, each rank its own emulated node; NCCL's socket transport
  /// carries the traffic): verdicts are meaningful, timings are not performance.
  bool oversubscribe = false;
  std::string dtype;  // empty: the spec's default (bf16 where it lists it, else its first dtype)
  std::string size;  // size class; empty = the spec's default
  std::vector<std::pair<std::string, long long>> size_overrides;  // -M / -N / --set K=V
  int trials = 5;
  std::optional<double> atol, rtol;
  int warmup = 500, iters = 100;
  bool perf = true;
  bool unchecked_timing = false;  // skip per-call checks: only to measure what they cost (flagged)
  /// Interleaved A/B timing (eval/gate.hpp): both jobs alive, timed in alternating rounds of this
  /// many calls; 0: the baseline's job, then the candidate's.
  int interleave = 0;
  /// An interleaved speedup whose 95 % interval reaches further than this fraction of it on either
  /// side is marked unstable.
  double unstable_bound = 0.02;
  double timeout_s = 60;  // per phase (each trial; the timed phase gets 5x)
  std::string json_out, dump_dir;
  /// --profile DIR: after the timed phase, kProfileCalls more calls per side with CUPTI recording
  /// (eval/profile_out.hpp); their traces and summaries go to DIR. Empty: no profile phase.
  std::string profile_dir;
  bool oracle = false;  // run: compare with the problem's CPU oracle
  std::string problems_dir;
  CompileOptions compile;
  bool progress = true;
  std::vector<std::string> argv;
  std::string worker_exe;  // pkb-worker
  std::optional<uint64_t> seed;  // for reproducing a run; secret and fresh by default
  std::string label;  // the record's label (solution set / run name)
  LauncherKind launcher = LauncherKind::local;
  MpiOptions mpi;  // with LauncherKind::mpi
};

/// Where the ranks of a job run: rank r on GPU r % gpus. Oversubscribed when W > gpus (then every
/// rank is its own emulated node, see worker/runtime.cu).
struct Placement {
  int gpus = 1;  // GPUs used
  int world = 1;
  bool oversubscribed() const { return world > gpus; }
  int device_of(int rank) const { return rank % gpus; }
  int ranks_per_gpu() const { return (world + gpus - 1) / gpus; }
};

/// The world size W of a run: --gpus when given, else every visible GPU, and with --oversubscribe
/// the problem's smallest W where fewer GPUs are visible (one GPU still runs a 2-rank problem).
inline int world_for_run(int gpus, int visible, int min_world, bool oversubscribe) {
  if (gpus > 0) return gpus;
  return oversubscribe && visible < min_world ? min_world : visible;
}

/// The placement of W ranks on `visible` GPUs; throws invalid_argument when W > visible without
/// --oversubscribe (the message suggests it).
Placement place_ranks(int world, int visible, bool oversubscribe);

/// Throws Error(invalid_argument / not_found) for bad input before anything is started;
/// everything that happens after that is in the record.
EvalRecord run_eval(const EvalOptions& opts);
EvalRecord run_dry(const EvalOptions& opts);

/// Exit code for a record: 0 ok, 1 the solution failed, 3 harness error.
int exit_code_for(const EvalRecord& r);

}  // namespace pkb
