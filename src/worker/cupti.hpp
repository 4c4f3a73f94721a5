// `--profile` in the solution's process (issue 23): NVIDIA's CUPTI activity API records what the
// GPU did during a few calls after the timed phase — kernels (CONCURRENT_KERNEL), copies (MEMCPY,
// and MEMCPY2 for peer copies), memsets — and the device-side time of the CUDA events pkb records
// around each call (CUDA_EVENT with device timestamps), the same events the timed phase reads.
//
// The clock: every timestamp is CLOCK_MONOTONIC in nanoseconds. CUPTI stamps GPU work on the GPU
// and converts it to the host clock it is given (cuptiActivityRegisterTimestampCallback), so the
// ranks of one host lie on one timeline; hosts of a multi-node job do not share it.
//
// A call's interval is [start event, stop event] on the device: exactly what the timed phase
// measures with cudaEventElapsedTime. The events are told apart from any the solution records by
// an external correlation id pushed around pkb's own cudaEventRecord (CUPTI's EXTERNAL_CORRELATION
// records, with runtime API records of cudaEventRecord only, which the correlation needs).
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

  /// Records `event` on `stream` as the start (or the end) of profiled call `call`.
  void mark(cudaEvent_t event, cudaStream_t stream, int call, bool end);

  /// Stops collection, flushes CUPTI's buffers and returns this rank's activity with the calls'
  /// intervals; throws Error(cuda_error) when a call's events carry no device time.
  profile::RankProfile finish(int rank);

  struct Sink;  // what the buffer callbacks fill (cupti.cpp)

 private:
  bool active_ = false;
  int calls_ = 0;
};

}  // namespace pkb::worker
