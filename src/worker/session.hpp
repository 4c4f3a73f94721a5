// One worker's job, in order: hello -> runtime (NCCL) -> load solution -> for each step (a size):
// pkb_init -> correctness trials -> timed calls -> pkb_finalize -> done -> teardown. Failures become
// a WorkerFailure with the status the driver will record.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "pkb/solution.h"
#include "proto/channel.hpp"
#include "proto/plan.hpp"
#include "worker/kernels.cuh"
#include "worker/resources.hpp"
#include "worker/runtime.hpp"

namespace pkb::worker {

struct WorkerFailure : std::runtime_error {
  WorkerFailure(Status s, std::string msg) : std::runtime_error(std::move(msg)), status(s) {}
  Status status;
};

/// A set of device tensors matching a list of descriptors, with pkb_tensor views.
struct TensorSet {
  std::vector<DeviceBuffer> buffers;
  std::vector<pkb_tensor> views;
  uint64_t seed = 0, stream = 0;  // what the inputs were drawn from; a call on them gets its per-call params from it
  TensorSet() = default;
  explicit TensorSet(const std::vector<TensorDesc>& descs);
};

class Session {
 public:
  Session(int fd, WorkerPlan plan);
  void run();
  const std::string& phase() const { return phase_; }

 private:
  void enter(const std::string& phase);
  void load_solution();
  void call_entry(const char* what, int rc);
  void call_run(TensorSet& in, TensorSet& out);
  void run_step(int step);
  void run_trial(int trial);
  void run_timing();
  void send_timing(const nlohmann::json& body, std::string samples);

  // timing helpers (timing.cpp)
  void regenerate(TensorSet& set, uint64_t seed, uint64_t stream, CheckSlot* digest_slots);
  /// Commits timed call `call` (-1: ready) to the driver and returns the driver's grant.
  nlohmann::json commit_call(int call, nlohmann::json body);
  double allreduce_max(double v);
  int agree_on_warmup(std::vector<TensorSet>& groups, TensorSet& out, int probe);
  void run_graph_timing(std::vector<TensorSet>& groups, TensorSet& out);

  int fd_;
  WorkerPlan plan_;
  const StepPlan* step_ = nullptr;
  int step_index_ = 0;
  std::string phase_ = "start";
  std::unique_ptr<Runtime> rt_;
  void* so_ = nullptr;
  pkb_init_fn init_ = nullptr;
  pkb_run_fn run_ = nullptr;
  pkb_finalize_fn finalize_ = nullptr;
};

/// Digests as hex strings, for messages.
std::string hex64(unsigned long long v);

}  // namespace pkb::worker
