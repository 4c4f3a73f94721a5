// Facts about this machine for records, plans and validation. The driver learns them without
// creating a CUDA context.
#pragma once
#include <string>

namespace pkb {

struct SystemInfo {
  int gpu_count = 0;
  std::string gpu_name;
  long long l2_bytes = 0;
  int sm_count = 0;
  std::string nvidia_driver;  // e.g. "580.159.04" (from /proc/driver/nvidia/version)
  int cuda_driver = 0;  // e.g. 13000
  int cuda_runtime = 0;
  int nccl = 0;  // e.g. 22803
  std::string hostname;
  std::string error;  // why no GPU is visible, when gpu_count == 0
};

SystemInfo probe_system();

/// "2.28.3" from 22803; "13.0" from 13000.
std::string nccl_version_string(int code);
std::string cuda_version_string(int code);

/// A fresh NCCL unique id as hex (the bootstrap root lives in this process until the job is up).
std::string nccl_unique_id_hex();

}  // namespace pkb
