// Content hashes for provenance and the build cache (SHA-256 through OpenSSL's libcrypto).
#pragma once
#include <memory>
#include <string>
#include <string_view>

namespace pkb {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(std::string_view bytes);
  /// Lower-case hex of the digest; the object cannot be updated afterwards.
  std::string hex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace pkb
