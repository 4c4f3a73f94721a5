// Poison values written into outputs before every call, so that an element the solution never
// wrote is recognisable. Floating types get a quiet NaN with a random payload and sign (a fresh one
// per call), integer types a random value.
#pragma once
#include <cstdint>

#include "core/dtype.hpp"
#include "core/hd.hpp"

namespace pkb {

/// The element bit pattern (low dtype_size bytes) that poisons a tensor of type d.
PKB_HD uint64_t poison_pattern(DType d, uint64_t bits) {
  switch (d) {
    case DType::bf16: return 0x7FC0u | (bits & 0x3Fu) | ((bits >> 8) & 1u) << 15;
    case DType::fp16: return 0x7E00u | (bits & 0x1FFu) | ((bits >> 12) & 1u) << 15;
    case DType::fp32: return 0x7FC00000u | (bits & 0x3FFFFFu) | ((bits >> 30) & 1u) << 31;
    case DType::fp64: return 0x7FF8000000000000ull | (bits & 0x7FFFFFFFFFFFFull) | (bits & (1ull << 63));
    case DType::fp8_e4m3: return 0x7Fu | ((bits & 1u) << 7);
    case DType::fp8_e5m2:
      return 0x7Fu | ((bits & 1u) << 7);  // a NaN of e5m2 too
    // A bool is written as 0 or 1: its poison is a byte no write produces (it used to be any byte,
    // so 2 calls in 256 took a fully written bool output for an unwritten one).
    case DType::boolean: return 2u + (bits & 0xFFu) % 254u;
    case DType::i8:
    case DType::u8: return bits & 0xFFu;
    case DType::i32: return bits & 0xFFFFFFFFu;
    case DType::i64: return bits;
  }
  return bits;
}

/// Raw bits of element i of a buffer (for poison comparison).
PKB_HD uint64_t element_bits_at(const void* base, size_t elem_size, size_t i) {
  const unsigned char* p = static_cast<const unsigned char*>(base) + i * elem_size;
  uint64_t v = 0;
  for (size_t b = 0; b < elem_size; ++b) v |= static_cast<uint64_t>(p[b]) << (8 * b);
  return v;
}

}  // namespace pkb
