// `--profile` in the solution's process (issue 23): NVIDIA's CUPTI activity API records what the
// GPU did during a few calls after the timed phase — kernels (CONCURRENT_KERNEL), copies (MEMCPY,
// and MEMCPY2 for peer copies), memsets — and the device-side time of the CUDA events pkb records
// around each call (CUDA_EVENT with device timestamps), the same events the timed phase reads.
//
// The clock: every timestamp is CLOCK_MONOTONIC in nanoseconds. CUPTI stamps GPU work on the GPU
// and converts it to the host clock it is given (cuptiActivityRegisterTimestampCallback), so the
// ranks of one host lie on one timeline; hosts of a multi-node job do not share it.
//
// A call's interval is on the device, between two empty pkb kernels the runner launches on the
// call's stream just before its start event and just after its stop event (kernels.cuh,
// launch_profile_mark): from the end of the first to the start of the second, which holds what the
// timed phase measures with cudaEventElapsedTime plus at most a launch gap on each side. (Kernel
// records are CUPTI's most basic activity; CUDA event records with device timestamps, matched to
// pkb's events by external correlation ids, gave no device time on CUDA 13.0 with an H100.)
//
// CUPTI's callbacks are plain functions, so one recorder at a time owns the process's collection.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "profile/profile.hpp"

namespace pkb::worker {

class ActivityRecorder {
 public:
  /// Starts collection; throws Error(cuda_error) with CUPTI's reason when it cannot.
  ActivityRecorder();
  /// Stops collection (if finish did not).
  ~ActivityRecorder();
  ActivityRecorder(const ActivityRecorder&) = delete;
  ActivityRecorder& operator=(const ActivityRecorder&) = delete;

  /// Marks the start (the first time) or the end (the second) of profiled call `call` on `stream`.
  void mark(cudaStream_t stream, int call);

  /// Stops collection, flushes CUPTI's buffers and returns this rank's activity with the calls'
  /// intervals; throws Error(cuda_error), with what CUPTI did record, when marks are missing.
  profile::RankProfile finish(int rank);

  struct Sink;  // what the buffer callbacks fill (cupti.cpp)

 private:
  bool active_ = false;
  int calls_ = 0;
};

}  // namespace pkb::worker
