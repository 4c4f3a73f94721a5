#include "roofline/hardware.hpp"

#include <algorithm>
#include <cctype>

#include "core/files.hpp"

namespace pkb {

double HardwareFacts::link_gbps() const { return std::max({link_store_gbps, link_load_gbps, link_ce_gbps}); }

nlohmann::json to_json(const HardwareFacts& h) {
  return {{"schema_version", h.schema_version},
          {"gpu_name", h.gpu_name},
          {"gpu_count", h.gpu_count},
          {"driver", h.driver},
          {"nccl", h.nccl},
          {"topology", h.topology},
          {"measured_at", h.measured_at},
          {"link_store_gbps", h.link_store_gbps},
          {"link_load_gbps", h.link_load_gbps},
          {"link_ce_gbps", h.link_ce_gbps},
          {"ring_gbps", h.ring_gbps},
          {"all_to_all_gbps", h.all_to_all_gbps},
          {"hbm_gbps", h.hbm_gbps},
          {"gemm_bf16_tflops", h.gemm_bf16_tflops},
          {"gemm_fp32_tflops", h.gemm_fp32_tflops},
          {"launch_us", h.launch_us},
          {"flag_rtt_us", h.flag_rtt_us},
          {"nccl_allreduce_8k_us", h.nccl_allreduce_8k_us}};
}

HardwareFacts hardware_from_json(const nlohmann::json& j) {
  HardwareFacts h;
  h.schema_version = j.value("schema_version", 1);
  h.gpu_name = j.value("gpu_name", "");
  h.gpu_count = j.value("gpu_count", 0);
  h.driver = j.value("driver", "");
  h.nccl = j.value("nccl", "");
  h.topology = j.value("topology", "");
  h.measured_at = j.value("measured_at", "");
  h.link_store_gbps = j.value("link_store_gbps", 0.0);
  h.link_load_gbps = j.value("link_load_gbps", 0.0);
  h.link_ce_gbps = j.value("link_ce_gbps", 0.0);
  h.ring_gbps = j.value("ring_gbps", 0.0);
  h.all_to_all_gbps = j.value("all_to_all_gbps", 0.0);
  h.hbm_gbps = j.value("hbm_gbps", 0.0);
  h.gemm_bf16_tflops = j.value("gemm_bf16_tflops", 0.0);
  h.gemm_fp32_tflops = j.value("gemm_fp32_tflops", 0.0);
  h.launch_us = j.value("launch_us", 0.0);
  h.flag_rtt_us = j.value("flag_rtt_us", 0.0);
  h.nccl_allreduce_8k_us = j.value("nccl_allreduce_8k_us", 0.0);
  return h;
}

std::filesystem::path calibration_path(const std::string& gpu_name, int gpu_count, const std::string& driver) {
  std::string key;
  for (char c : gpu_name + "-x" + std::to_string(gpu_count) + "-" + driver)
    key.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_');
  return cache_dir() / "calibration" / (key + ".json");
}

std::optional<HardwareFacts> load_calibration(const std::string& gpu_name, int gpu_count, const std::string& driver) {
  auto p = calibration_path(gpu_name, gpu_count, driver);
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  try {
    return hardware_from_json(nlohmann::json::parse(read_file(p)));
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged file is as good as none; calibrate again
  }
}

void save_calibration(const HardwareFacts& h) {
  write_file_atomic(calibration_path(h.gpu_name, h.gpu_count, h.driver), to_json(h).dump(2) + "\n");
}

}  // namespace pkb
