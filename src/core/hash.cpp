#include "core/hash.hpp"

#include <openssl/evp.h>

#include "core/error.hpp"

namespace pkb {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool done = false;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    fail(Errc::internal, "OpenSSL could not initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

Sha256& Sha256::update(std::string_view bytes) {
  if (impl_->done) fail(Errc::internal, "Sha256::update after hex()");
  EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
  return *this;
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  impl_->done = true;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return Sha256().update(bytes).hex(); }

}  // namespace pkb
