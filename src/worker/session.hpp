// One rank's checker (worker/runner.hpp has the split): hello -> setup (start the runner, which
// joins NCCL) -> load (the runner loads the solution) -> for each step (a size): tensor sets shared
// with the runner -> pkb_init -> correctness trials -> timed calls -> [profiled calls, with
// --profile] -> pkb_finalize -> done -> teardown. The checker generates every input, poisons and
// fingerprints outputs, samples them and reports to the driver; the runner only runs calls.
// Failures become a WorkerFailure with the status the driver will record.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "proto/channel.hpp"
#include "proto/plan.hpp"
#include "worker/kernels.cuh"
#include "worker/resources.hpp"
#include "worker/shared_memory.hpp"

namespace pkb::worker {

struct WorkerFailure : std::runtime_error {
  WorkerFailure(Status s, std::string msg) : std::runtime_error(std::move(msg)), status(s) {}
  Status status;
};

class RunnerLink;

/// A set of tensors in one allocation shared with the runner; `id` names it there.
struct TensorSet {
  int id = 0;
  SharedMapping mem;
  SetLayout layout;
  std::vector<void*> data;  // each tensor's address in this process
  uint64_t seed = 0, stream = 0;  // what the inputs were drawn from; a call on them gets its per-call params from it
};

class Session {
 public:
  Session(int fd, WorkerPlan plan, std::string exe);
  ~Session();
  void run();
  const std::string& phase() const { return phase_; }

 private:
  void enter(const std::string& phase);
  void share_sets();
  /// The per-call parameter values of a call on `set` (drawn from the seed its inputs came from).
  std::vector<long long> call_params(const TensorSet& set) const;
  /// Runs one call in the runner; at its return, fingerprints the outputs into `at_return` (if not
  /// null). Returns the runner's reply for the finished call (its event time).
  nlohmann::json run_call(const TensorSet& in, nlohmann::json op, CheckSlot* at_return, const std::vector<uint64_t>& poisons);
  void run_step(int step);
  void run_trial(int trial);
  void run_timing();
  void run_graph_timing();
  void run_profile();  // --profile (profiling.cpp)
  void send_timing(const nlohmann::json& body, std::string samples);
  /// What of output `o` is checked: every element, or a ragged output's counted rows (its count read
  /// from the output set on the device).
  RowLimit row_limit(size_t o) const;
  /// Fingerprints output `o` of the output set (poisoned with `poison`) into `slot` on the checker's stream.
  void check_output(size_t o, uint64_t poison, CheckSlot* slot);

  // timing helpers (timing.cpp)
  void regenerate(TensorSet& set, uint64_t seed, uint64_t stream, CheckSlot* digest_slots);
  /// Commits timed call `call` (-1: ready) to the driver and returns the driver's grant.
  nlohmann::json commit_call(int call, nlohmann::json body);

  int fd_;
  WorkerPlan plan_;
  std::string exe_;
  const StepPlan* step_ = nullptr;
  int step_index_ = 0;
  std::string phase_ = "start";
  std::unique_ptr<RunnerLink> runner_;
  std::unique_ptr<Stream> hs_;  // the checker's own stream (generation, checks)
  cudaEvent_t returned_ = nullptr;  // recorded by the runner when pkb_run returns
  size_t l2_bytes_ = 0;
  std::vector<TensorSet> ins_;  // two input sets that alternate
  TensorSet out_;
};

/// Digests as hex strings, for messages.
std::string hex64(unsigned long long v);

}  // namespace pkb::worker
