// `pkb calibrate`: measures this machine once — peer bandwidth per pair (SM stores, SM loads, copy
// engine), all-GPUs-at-once aggregates (ring push, all-to-all push), HBM copy bandwidth, bf16 and
// fp32 GEMM rates (cuBLAS), kernel launch cost, a cross-GPU flag round trip, and NCCL's small
// all-reduce latency — and returns them as typed facts for the roofline, reports and prompts.
// Runs in one process over all GPUs (trusted harness code; no solution is involved).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "roofline/hardware.hpp"

namespace pkb {

struct CalibrateOptions {
  int gpus = 0;  // 0: every visible GPU
  size_t link_bytes = 256u << 20;
  size_t hbm_bytes = 1u << 30;
  int gemm_n = 8192;
  int reps = 5;
  /// Called before each step: (step index from 1, number of steps, what).
  std::function<void(int, int, const std::string&)> progress;
};

/// One measured pair (for the detailed table).
struct PairRate {
  int from = 0, to = 0;
  double store_gbps = 0, load_gbps = 0, ce_gbps = 0;
};

struct CalibrateResult {
  HardwareFacts facts;
  std::vector<PairRate> pairs;
};

/// Throws Error(cuda_error/nccl_error/...) with the failing call when the machine misbehaves.
CalibrateResult calibrate(const CalibrateOptions& opts);

}  // namespace pkb
