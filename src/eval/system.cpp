#include "eval/system.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "core/error.hpp"

namespace pkb {

SystemInfo probe_system() {
  SystemInfo s;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) s.hostname = host;
  std::ifstream v("/proc/driver/nvidia/version");
  std::string line;
  if (v && std::getline(v, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("([0-9]+\\.[0-9]+(\\.[0-9]+)?)"))) s.nvidia_driver = m[1];
  }
  ncclGetVersion(&s.nccl);
  cudaRuntimeGetVersion(&s.cuda_runtime);
  cudaDriverGetVersion(&s.cuda_driver);
  cudaError_t e = cudaGetDeviceCount(&s.gpu_count);
  // Without a driver the runtime says "driver version is insufficient"; say what that means here.
  const std::string no_gpu_works = "; list, show, prompt, build, report, compare and generate work without one";
  if (e != cudaSuccess) {
    s.gpu_count = 0;
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::string why = cudaGetErrorString(e);
    if (e == cudaErrorNoDevice && visible)
      why = "no NVIDIA GPU is visible with CUDA_VISIBLE_DEVICES='" + std::string(visible) + "'" + no_gpu_works;
    else if (e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && s.nvidia_driver.empty()))
      why = "no NVIDIA GPU or driver was found on this machine" + no_gpu_works;
    s.error = std::string(cudaGetErrorName(e)) + ": " + why;
    return s;
  }
  if (s.gpu_count > 0) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
      s.gpu_name = p.name;
      s.l2_bytes = p.l2CacheSize;
      s.sm_count = p.multiProcessorCount;
    }
  } else {
    s.error = "no NVIDIA GPU was found on this machine" + no_gpu_works;
  }
  return s;
}

std::string nccl_version_string(int code) {
  if (code <= 0) return "unknown";
  int major = code / 10000, minor = (code / 100) % 100, patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cuda_version_string(int code) {
  if (code <= 0) return "unknown";
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

std::string nccl_unique_id_hex() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) fail(Errc::nccl_error, std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (char c : id.internal) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(kHex[u >> 4]);
    out.push_back(kHex[u & 15]);
  }
  return out;
}

}  // namespace pkb
