// The performance model: how fast a problem instance could possibly run on this machine.
//
//   floor = max(link bytes / link rate, FLOPs / matrix rate, HBM bytes / HBM rate) + one launch
//   roofline % = floor / measured time
//
// The byte and FLOP counts come from the problem's spec ([roofline] expressions, evaluated for every
// rank; the busiest rank counts). The rates come from `pkb calibrate` when this machine has been
// measured, else from the GPU's datasheet (and the record says which). A measured time below the
// floor computed from *datasheet peaks* (no launch term) is physically impossible and is flagged.
// docs/performance.md derives the method.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "roofline/hardware.hpp"
#include "spec/spec.hpp"

namespace pkb {

/// The work of one instance, per rank (the busiest rank's figures).
struct Work {
  double link_bytes = 0;  // one direction, over the busiest rank's links
  double flops = 0;
  double hbm_bytes = 0;
  double algbw_bytes = 0;  // nccl-tests' S
  double busbw_factor = 1;
};

/// Evaluates the spec's [roofline] for every rank; nullopt if the spec has none.
std::optional<Work> instance_work(const Instance& inst);

/// Datasheet ceilings for known GPUs (H100/H200 SXM: NVLink 450 GB/s per direction, ...); for an
/// unknown GPU, H100 figures (an optimistic floor is still a valid floor).
HardwareFacts datasheet_facts(const std::string& gpu_name, int gpu_count);

struct Roofline {
  std::string source;  // "calibrated" or "datasheet"
  double link_us = 0, flop_us = 0, hbm_us = 0, launch_us = 0;
  double floor_us = 0;  // max of the three plus one launch
  std::string bound;  // "link", "compute" or "hbm"
  double peak_floor_us = 0;  // from datasheet peaks, without the launch: nothing can beat it
  double measured_us = 0;
  double pct = 0;  // floor / measured, in percent
  double link_gbps = 0;  // the link rate the link figures divide by (calibrated or datasheet)
  double algbw_gbps = 0, busbw_gbps = 0, link_pct = 0;  // link_pct: busbw / link_gbps
  bool impossible = false;  // measured < peak_floor
};

Roofline compute_roofline(const Work& w, const HardwareFacts& ceilings, const HardwareFacts& peaks, DType dtype,
                          double measured_us, const std::string& source);

nlohmann::json to_json(const Roofline& r, const Work& w);

}  // namespace pkb
