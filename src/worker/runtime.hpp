// One rank's execution environment: device, stream, NCCL communicator and sub-groups, cuBLAS,
// device communicators, the symmetric allocator, and the pkb_context a solution receives.
#pragma once
#include <cublas_v2.h>
#include <nccl.h>
#include <nccl_device.h>

#include <memory>
#include <string>
#include <vector>

#include "pkb/solution.h"
#include "proto/plan.hpp"
#include "worker/resources.hpp"

namespace pkb::worker {

/// Why symmetric memory is refused with --oversubscribe (the solution's error and the record's message).
inline constexpr const char* kOversubscribedSymmetric =
    "this run places several ranks on one GPU (--oversubscribe), where NCCL gives no symmetric memory and no "
    "device communicator (ctx->devcomm is NULL); run on one GPU per rank, or fall back to NCCL collectives";

class Runtime {
 public:
  /// Device, stream, NCCL init (collective), groups, cuBLAS, device communicators.
  explicit Runtime(const WorkerPlan& plan);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  pkb_context* ctx() { return &ctx_; }
  cudaStream_t stream() const { return stream_.get(); }
  /// The harness's own stream (generation, checks) — separate from the solution's.
  cudaStream_t harness_stream() const { return hstream_.get(); }

  /// Device-side barrier over every rank on `s` (LSA barrier; NCCL all-reduce beyond one node),
  /// followed by `delay_us` of GPU-side waiting.
  void barrier(cudaStream_t s, double delay_us = 0);

  /// The last message a solution passed to set_error (cleared by take).
  std::string take_error();

  /// The parameters the solution sees (ctx->params, ctx->fparam) for `step`: its integer parameters,
  /// then its per-call ones (at trial_low until set_call).
  void set_params(const StepPlan& step);
  /// Gives the per-call parameters their values for the next call (the checker draws them from the
  /// call's seed, which this process never sees); as many values as the step has per-call parameters.
  void set_call(const std::vector<long long>& values);
  size_t call_param_count() const { return trial_params_.size(); }

  /// Ordered, collective teardown: frees leftover symmetric buffers, device communicators,
  /// sub-communicators, then finalizes and destroys the communicator.
  void teardown();

  const WorkerPlan& plan() const { return plan_; }
  /// Whether symmetric_alloc was refused because the run is oversubscribed.
  bool refused_symmetric_memory() const { return refused_symmetric_; }

 private:
  struct SymAlloc {
    void* ptr = nullptr;
    ncclWindow_t win = nullptr;
    size_t bytes = 0;
    std::vector<void*> peers;
    DeviceBuffer peers_dev;
  };

  static int symmetric_alloc(pkb_context* ctx, size_t bytes, pkb_symmetric* out);
  static int symmetric_free(pkb_context* ctx, pkb_symmetric* buf);
  static void set_error(pkb_context* ctx, const char* msg);
  static const pkb_group* find_group(const pkb_context* ctx, const char* name);
  static int64_t param(const pkb_context* ctx, const char* name, int64_t fallback);
  static double fparam(const pkb_context* ctx, const char* name, double fallback);
  void free_alloc(SymAlloc& a);

  struct DeviceSelect {  // first member: the device is current before any stream is created
    explicit DeviceSelect(int d) { CUDA_CHECK(cudaSetDevice(d)); }
  };

  const WorkerPlan& plan_;
  DeviceSelect device_;
  Stream stream_, hstream_;
  ncclComm_t comm_ = nullptr;
  ncclDevComm devcomm_{};  // for the solution
  ncclDevComm harness_devcomm_{};  // for the harness's barriers
  bool devcomms_ = false;
  bool lsa_world_ = false;  // every rank reachable by load/store
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_, barrier_buf_;
  std::vector<ncclComm_t> group_comms_;
  std::vector<pkb_group> groups_;
  std::vector<std::vector<int>> group_members_;
  std::vector<std::pair<std::string, long long>> param_values_;
  std::vector<pkb_param> params_;
  std::vector<std::pair<std::string, double>> float_params_;
  std::vector<TrialParam> trial_params_;  // the last trial_params_.size() entries of params_
  std::vector<std::unique_ptr<SymAlloc>> allocs_;
  std::string error_;
  std::string gpu_name_;
  pkb_context ctx_{};
  bool torn_down_ = false;
  bool refused_symmetric_ = false;
};

}  // namespace pkb::worker
