// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11), identical on host and device.
// Every generated element is a pure function of (key, element index): inputs can be regenerated
// anywhere — on the GPU by workers, on the CPU by oracles and tests — without shipping them.
#pragma once
#include <cstdint>

#include "core/hd.hpp"

namespace pkb::rng {

struct U32x4 {
  uint32_t v[4];
};

PKB_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

/// Philox4x32 with 10 rounds.
PKB_HD U32x4 philox4x32_10(U32x4 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(M0, ctr.v[0], &hi0);
    uint32_t lo1 = mulhilo(M1, ctr.v[2], &hi1);
    ctr = U32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += W0;
    k1 += W1;
  }
  return ctr;
}

/// SplitMix64 finaliser: a good 64-bit mixer, used to derive keys and sample positions.
PKB_HD uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Key of one generated tensor: (run seed, stream, rank, tensor index). `stream` separates
/// correctness trials (0..trials-1) from timing groups (PKB_TIMING_STREAM + g).
PKB_HD uint64_t tensor_key(uint64_t seed, uint64_t stream, uint64_t rank, uint64_t tensor) {
  uint64_t k = mix64(seed);
  k = mix64(k ^ (stream * 0x9E3779B97F4A7C15ull));
  k = mix64(k ^ (rank * 0xD1B54A32D192ED03ull));
  k = mix64(k ^ (tensor * 0x8CB92BA72F3D8DD7ull));
  return k;
}

/// Four random 32-bit words for element `index` of the tensor keyed by `key`.
PKB_HD U32x4 element_bits(uint64_t key, uint64_t index) {
  U32x4 ctr{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0x70Bu, 0u}};
  return philox4x32_10(ctr, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

inline constexpr uint64_t kTimingStream = 1ull << 32;

}  // namespace pkb::rng
