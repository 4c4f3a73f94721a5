#include "report/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/files.hpp"

namespace pkb {

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  size_t off = 0;
  for (auto& t : tensors) {
    size_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<size_t>(d);
    if (numel * dtype_size(t.dtype) != t.bytes.size())
      fail(Errc::internal, "safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes for its shape");
    header[t.name] = {
        {"dtype", std::string(safetensors_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  out += h;
  for (auto& t : tensors) out += t.bytes;
  write_file_atomic(path, out);
}

const NamedTensor* SafetensorsFile::find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  std::string data = read_file(path);
  auto bad = [&](const std::string& why) { fail(Errc::parse_error, path.string() + ": not a valid safetensors file: " + why); };
  if (data.size() < 8) bad("shorter than its 8-byte header length");
  uint64_t n;
  std::memcpy(&n, data.data(), 8);
  if (n > data.size() - 8) bad("header length beyond the end of the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data.substr(8, n));
  } catch (const std::exception& e) {
    bad(std::string("header is not JSON: ") + e.what());
  }
  SafetensorsFile f;
  size_t base = 8 + n;
  std::vector<std::pair<size_t, NamedTensor>> ordered;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, x] : v.items()) f.metadata[k] = x.is_string() ? x.get<std::string>() : x.dump();
      continue;
    }
    NamedTensor t;
    t.name = name;
    auto d = parse_safetensors_dtype(v.at("dtype").get<std::string>());
    if (!d) bad("tensor '" + name + "' has unsupported dtype " + v.at("dtype").get<std::string>());
    t.dtype = *d;
    t.shape = v.at("shape").get<std::vector<long long>>();
    auto offs = v.at("data_offsets").get<std::vector<size_t>>();
    if (offs.size() != 2 || offs[0] > offs[1] || base + offs[1] > data.size()) bad("tensor '" + name + "' has bad offsets");
    size_t numel = 1;
    for (auto s : t.shape) numel *= static_cast<size_t>(s);
    if (numel * dtype_size(t.dtype) != offs[1] - offs[0]) bad("tensor '" + name + "' size does not match its shape");
    t.bytes = data.substr(base + offs[0], offs[1] - offs[0]);
    ordered.emplace_back(offs[0], std::move(t));
  }
  std::sort(ordered.begin(), ordered.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [o, t] : ordered) f.tensors.push_back(std::move(t));
  return f;
}

}  // namespace pkb
