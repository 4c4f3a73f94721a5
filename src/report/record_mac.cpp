#include "report/record_mac.hpp"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/files.hpp"

namespace pkb {

namespace {

std::string hex(const unsigned char* p, size_t n) {
  std::string out(2 * n, '0');
  static const char* digits = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

}  // namespace

std::optional<std::string> record_key(bool create) {
  namespace fs = std::filesystem;
  fs::path path = cache_dir() / "record.key";
  std::ifstream in(path);
  std::string key;
  if (in && std::getline(in, key) && key.size() == 64) return key;
  if (!create) return std::nullopt;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  unsigned char raw[32];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) return std::nullopt;
  key = hex(raw, sizeof raw);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return record_key(false);  // made by a concurrent pkb, or not writable here
  std::string line = key + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!ok) return std::nullopt;
  return key;
}

std::string record_mac(const nlohmann::json& record, const std::string& key) {
  nlohmann::json body = record;
  if (body.is_object()) body.erase("mac");
  std::string text = body.dump();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()), text.size(),
       out, &len);
  return hex(out, len);
}

nlohmann::json signed_record(nlohmann::json record) {
  if (auto key = record_key(true)) record["mac"] = record_mac(record, *key);
  return record;
}

std::vector<bool> RecordTrust::decide(const std::vector<std::string>& sources, const std::vector<std::string>& macs,
                                      const std::vector<bool>& valid) {
  std::vector<bool> keep(sources.size(), true);
  if (!key) {  // nothing to verify with: keep everything, as unsigned
    unsigned_kept += sources.size();
    return keep;
  }
  bool signed_file = std::find(valid.begin(), valid.end(), true) != valid.end();
  for (size_t i = 0; i < sources.size(); ++i) {
    if (valid[i]) continue;
    if (!macs[i].empty()) {
      keep[i] = false;
      rejected.push_back(sources[i] +
                         ": its MAC does not verify (the record was altered, or written by another "
                         "machine's pkb; --no-verify keeps it)");
    } else if (signed_file) {
      keep[i] = false;
      rejected.push_back(sources[i] + ": no MAC in a file of signed records (a line pkb's driver did not write)");
    } else {
      ++unsigned_kept;
    }
  }
  return keep;
}

}  // namespace pkb
