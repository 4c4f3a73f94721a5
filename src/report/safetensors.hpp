// The safetensors format (https://github.com/huggingface/safetensors): a little-endian u64 header
// length, a JSON header naming each tensor's dtype, shape and byte range, then the raw bytes.
// Used for --dump artifacts, so that PyTorch (safetensors.torch.load_file) reads pkb's tensors.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace pkb {

struct NamedTensor {
  std::string name;
  DType dtype = DType::fp32;
  std::vector<long long> shape;
  std::string bytes;
};

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::vector<NamedTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  const NamedTensor* find(const std::string& name) const;
};

/// Reads and validates a file; errors name the file and what is wrong.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

}  // namespace pkb
