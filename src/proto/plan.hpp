// The job plan the driver sends to each worker, and the JSON mapping of its parts. Both sides
// include this header, so the two ends of the channel cannot drift apart.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "core/dtype.hpp"

namespace pkb {

struct TensorDesc {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<long long> shape;
  Dist dist;
  size_t numel() const {
    size_t n = 1;
    for (auto d : shape) n *= static_cast<size_t>(d);
    return n;
  }
  size_t bytes() const { return numel() * dtype_size(dtype); }
};

struct GroupDesc {
  std::string name;
  int color = 0, key = 0;      // ncclCommSplit arguments (color < 0: not a member)
  std::vector<int> members;    // world ranks of this rank's group, in group-rank order
};

struct TimingPlan {
  bool enabled = false;
  bool graph = false;          // also time a CUDA graph of all timed calls (pure device time)
  bool checks = true;          // poison, fingerprint, sample and regenerate around every call
  int warmup = 500;            // upper bound; cut short after warmup_budget_ms
  double warmup_budget_ms = 2000;
  int iters = 100;
  int groups = 0;              // input groups; 0 = enough to exceed l2_factor x L2
  double l2_factor = 3.0;
  int samples_per_output = 256;
  double predelay_us = 20.0;   // GPU-side delay after the pre-call barrier (hides host launch gaps)
};

/// One configuration of the problem (a size): pkb_init, trials, timing, pkb_finalize. An eval has
/// one step; a sweep has one per size, all in the same processes.
struct StepPlan {
  std::string name;            // e.g. "default" or "64 KiB"
  std::vector<TensorDesc> inputs, outputs;
  std::vector<std::pair<std::string, long long>> params;
  uint64_t seed = 0;           // secret: this step's inputs, poison values and sample positions
  int trials = 1;
  TimingPlan timing;
};

struct WorkerPlan {
  std::string role;            // "baseline" or "candidate" (logs only)
  std::string problem;
  int world = 0, rank = 0, device = 0;
  /// More ranks than GPUs: the worker takes GPU device % visible and is its own emulated node.
  bool oversubscribed = false;
  DType dtype = DType::bf16;
  std::string so_path;
  std::string nccl_id_hex;
  std::vector<GroupDesc> groups;
  bool send_inputs = false;    // also return each trial's inputs (for --dump and oracles)
  double link_gbps = 0, hbm_gbps = 0;  // calibration, passed to the solution's topology
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
inline constexpr uint64_t kPoisonStream = 1ull << 40;
inline constexpr uint64_t kSampleStream = 1ull << 41;

/// The element positions of output `output` on rank `rank` whose values every timed call reports.
std::vector<uint64_t> sample_positions(uint64_t seed, int rank, int output, size_t numel, int k);

/// The poison value used before call `call` (trials: call = trial; timed calls: trials + i).
/// Floating outputs get a NaN with a random payload; integer outputs a random value.
uint64_t poison_bits(uint64_t seed, uint64_t call);

}  // namespace pkb
