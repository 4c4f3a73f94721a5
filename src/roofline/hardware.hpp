// Measured hardware facts (`pkb calibrate`): one typed table that feeds the roofline, the reports
// and the prompts. Units are in the field names; 0 means "not measured".
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace pkb {

struct HardwareFacts {
  int schema_version = 1;
  std::string gpu_name;  // "NVIDIA H200"
  int gpu_count = 0;
  std::string driver;  // NVIDIA driver version
  std::string nccl;  // NCCL version used for the NCCL measurements
  std::string topology;  // e.g. "NV18 between every pair"
  std::string measured_at;  // ISO 8601

  // Interconnect, one direction, GB/s (1e9 bytes/s).
  double link_store_gbps = 0;  // SM kernel pushing to one peer (remote stores)
  double link_load_gbps = 0;  // SM kernel pulling from one peer (remote loads)
  double link_ce_gbps = 0;  // copy engine, one peer
  double ring_gbps = 0;  // every GPU pushing to its ring neighbour at once, per GPU
  double all_to_all_gbps = 0;  // every GPU pushing to all peers at once, egress per GPU
  // Memory and compute.
  double hbm_gbps = 0;  // device-to-device copy, bytes read + written per second
  double gemm_bf16_tflops = 0;  // cuBLAS, large square, random data
  double gemm_fp32_tflops = 0;
  // Latencies, microseconds.
  double launch_us = 0;  // empty kernel launch to completion, back to back
  double flag_rtt_us = 0;  // cross-GPU flag ping-pong, one round trip
  double nccl_allreduce_8k_us = 0;  // NCCL all-reduce of 8 KiB, all GPUs, graph replay

  /// The link rate the roofline uses: the best sustained SM rate to a peer.
  double link_gbps() const;
};

nlohmann::json to_json(const HardwareFacts& h);
HardwareFacts hardware_from_json(const nlohmann::json& j);

/// Where calibration for this machine is stored: <cache>/calibration/<gpu>-x<count>-<driver>.json.
std::filesystem::path calibration_path(const std::string& gpu_name, int gpu_count, const std::string& driver);
/// The stored calibration for this machine, if `pkb calibrate` has run here.
std::optional<HardwareFacts> load_calibration(const std::string& gpu_name, int gpu_count, const std::string& driver);
void save_calibration(const HardwareFacts& h);

}  // namespace pkb
