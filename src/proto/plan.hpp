// The job plan the driver sends to each worker, and the JSON mapping of its parts. Both sides
// include this header, so the two ends of the channel cannot drift apart.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "core/dtype.hpp"
#include "core/trial_param.hpp"

namespace pkb {

struct TensorDesc {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<long long> shape;
  Dist dist;
  /// Inputs only: the problem modifies it in place (the solution's process maps it read-write; every
  /// other input is mapped read-only there).
  bool writable = false;
  /// Outputs only: a ragged output's count (an index into the step's outputs), or -1. Only the first
  /// `count` rows (of row_elems() elements) are fingerprinted, counted and sampled.
  int count_of = -1;
  size_t numel() const {
    size_t n = 1;
    for (auto d : shape) n *= static_cast<size_t>(d);
    return n;
  }
  size_t row_elems() const {
    size_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
    return n;
  }
  size_t bytes() const { return numel() * dtype_size(dtype); }
};

struct GroupDesc {
  std::string name;
  int color = 0, key = 0;  // ncclCommSplit arguments (color < 0: not a member)
  std::vector<int> members;  // world ranks of this rank's group, in group-rank order
};

struct TimingPlan {
  bool enabled = false;
  bool graph = false;  // also time a CUDA graph of all timed calls (pure device time)
  bool checks = true;  // poison, fingerprint, sample and regenerate around every call
  int warmup = 500;  // upper bound; cut short after warmup_budget_ms
  double warmup_budget_ms = 2000;
  int iters = 100;
  int groups = 2;  // input sets that alternate (pointers change from call to call)
  double l2_factor = 3.0;  // after generating a call's inputs, write l2_factor x L2 of other data
  int samples_per_output = 256;
  int full_checks = 2;  // timed calls whose every element is compared (chosen in secret, revealed after the call)
  double predelay_us = 20.0;  // GPU-side delay after the pre-call barrier (hides host launch gaps)
};

/// One configuration of the problem (a size): pkb_init, trials, timing, pkb_finalize. An eval has
/// one step; a sweep has one per size, all in the same processes.
struct StepPlan {
  std::string name;  // e.g. "default" or "64 KiB"
  std::vector<TensorDesc> inputs, outputs;
  std::vector<std::pair<std::string, long long>> params;
  std::vector<std::pair<std::string, double>> float_params;  // ctx->fparam only
  /// Per-call integer parameters, appended to ctx->params: before each pkb_run the worker sets each to
  /// trial_param_value of the seed and stream its inputs came from (trial t: trial_seeds[t], t).
  std::vector<TrialParam> trial_params;
  /// Secret, never sent to a worker: every call's inputs, poison and sample positions derive from it
  /// (stream_seed), and the workers get each timed call's share only when that call is due.
  uint64_t seed = 0;
  /// What the worker may know in advance: the correctness trials' seeds (trials are compared element by
  /// element, so knowing their inputs early gains nothing) and the warm-up calls' (neither timed nor
  /// checked). Filled from `seed` when the plan is sent (seal_for_worker).
  std::vector<uint64_t> trial_seeds;
  uint64_t warmup_seed = 0;
  int trials = 1;
  TimingPlan timing;
  /// `--profile`: calls run after the timed phase and its checks, with CUPTI recording the GPU's
  /// activity (worker/cupti.hpp); their outputs are not checked and their times enter no timing
  /// record. 0 (every job without --profile): no profile phase, and the plan's JSON says nothing.
  int profile_calls = 0;
};

/// What the runner (the solution's process) confines itself to before it touches the GPU
/// (proc/confine.hpp): nothing where `enabled` is false (PKB_SANDBOX=off, or a kernel without
/// Landlock). The solution's shared object stays readable even below a hidden path.
struct Confinement {
  bool enabled = false;
  std::vector<std::string> hidden;  // unreadable: pkb's cache (the record key, other builds)
  std::vector<std::string> writable;  // the only trees it may write: /dev (GPUs, NCCL's /dev/shm) and /proc
};

struct WorkerPlan {
  std::string role;  // the side's label in the worker's logs ("baseline", "candidate", or the run's own label): free text
  std::string problem;
  int world = 0, rank = 0, device = 0;
  /// More ranks than GPUs: the worker takes GPU device % visible and is its own emulated node.
  bool oversubscribed = false;
  DType dtype = DType::bf16;
  std::string so_path;
  std::string nccl_id_hex;
  std::vector<GroupDesc> groups;
  bool send_inputs = false;  // also return each trial's inputs (for --dump and oracles)
  double link_gbps = 0, hbm_gbps = 0;  // calibration, passed to the solution's topology
  Confinement confine;
  std::vector<StepPlan> steps;
};

void to_json(nlohmann::json& j, const Dist& d);
void from_json(const nlohmann::json& j, Dist& d);
void to_json(nlohmann::json& j, const TensorDesc& t);
void from_json(const nlohmann::json& j, TensorDesc& t);
void to_json(nlohmann::json& j, const TimingPlan& t);
void from_json(const nlohmann::json& j, TimingPlan& t);
void to_json(nlohmann::json& j, const StepPlan& t);
void from_json(const nlohmann::json& j, StepPlan& t);
void to_json(nlohmann::json& j, const WorkerPlan& p);
void from_json(const nlohmann::json& j, WorkerPlan& p);

/// Stream ids for input generation (see rng::tensor_key). Correctness trial t uses stream t; the
/// w-th warm-up call kWarmupStream + w; the i-th timed call kTimedStream + i, so that every call
/// sees inputs no earlier call saw.
inline constexpr uint64_t kWarmupStream = 1ull << 36;
inline constexpr uint64_t kTimedStream = 1ull << 37;
/// Profiled call i (StepPlan::profile_calls) takes its inputs from the warm-up seed and stream
/// kProfileStream + i: neither timed nor checked, like the warm-up calls.
inline constexpr uint64_t kProfileStream = 1ull << 38;
inline constexpr int kMaxProfileCalls = 100;
inline constexpr uint64_t kPoisonStream = 1ull << 40;
inline constexpr uint64_t kSampleStream = 1ull << 41;

/// The seed of one call (stream: trial t, kWarmupStream, kTimedStream + i) from the step's secret
/// seed, through SHA-256: one call's seed reveals nothing of another's, nor of the step's. Inputs of
/// rank r, tensor i of that call: input_key(stream_seed(seed, stream), stream, r, i, dist).
uint64_t stream_seed(uint64_t step_seed, uint64_t stream);
/// The key of timed call i's sample positions, and whether call i is one of the fully checked ones
/// (the driver reveals both to a worker only after the call's results were committed).
uint64_t sample_key(uint64_t step_seed, int call);
std::vector<int> full_check_calls(uint64_t step_seed, int iters, int count);

/// The element positions of output `output` on rank `rank` that a timed call reports (key: sample_key).
std::vector<uint64_t> sample_positions(uint64_t key, int rank, int output, size_t numel, int k);

/// The poison value used before call `call` of the stream whose seed is `seed` (trials: call =
/// trial; timed calls: trials + i). Floating outputs get a NaN with a random payload; integer
/// outputs a random value.
uint64_t poison_bits(uint64_t seed, uint64_t call);

/// The plan a worker receives: the step seeds replaced by what it may know in advance.
WorkerPlan seal_for_worker(WorkerPlan plan);
/// The plan the solution's process (a rank's runner) receives from its checker: no seed of any
/// kind, no check settings (samples, fully checked calls), nothing from which inputs, poison or
/// sample positions could be predicted.
WorkerPlan seal_for_runner(WorkerPlan plan);

}  // namespace pkb
