// Output fingerprints: an order-independent 64-bit digest of a buffer's bytes (a sum of mixed
// 32-bit words), computed by workers on the device and re-computable on the host. Equal digests
// mean (with overwhelming probability) bit-identical buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/hd.hpp"
#include "core/philox.hpp"

namespace pkb {

PKB_HD uint64_t digest_word(uint32_t word, uint64_t word_index) {
  return rng::mix64((static_cast<uint64_t>(word) << 32) ^ (word_index * 0x9E3779B97F4A7C15ull) ^ word);
}

/// Host reference of the device digest: words are little-endian 32-bit, the tail zero-padded.
inline uint64_t digest_bytes(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t sum = 0;
  size_t words = bytes / 4;
  for (size_t i = 0; i < words; ++i) {
    uint32_t w;
    std::memcpy(&w, p + 4 * i, 4);
    sum += digest_word(w, i);
  }
  if (bytes % 4) {
    uint32_t w = 0;
    std::memcpy(&w, p + 4 * words, bytes % 4);
    sum += digest_word(w, words);
  }
  return sum;
}

}  // namespace pkb
