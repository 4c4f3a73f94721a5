// Bit-exact conversions between float and the narrow floating types, identical on host and device
// (round to nearest even, NaN kept quiet). Used by input generation and by host-side checks.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hd.hpp"

namespace pkb::num {

PKB_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
PKB_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/// float -> bfloat16 bits, round to nearest even.
PKB_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
PKB_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// float -> IEEE binary16 bits, round to nearest even (subnormals and overflow to inf handled).
PKB_HD uint16_t float_to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal (or zero) in fp16
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // 14..24 + 1
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t exp = ((abs >> 23) - 112u) << 10;
  uint32_t mant = (abs >> 13) & 0x3ffu;
  uint32_t rem = abs & 0x1fffu;
  uint32_t h = exp | mant;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
PKB_HD float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// FP8 E4M3 (OCP "fn" variant: no infinities, 0x7f/0xff are NaN, max 448) to float.
PKB_HD float fp8e4m3_to_float(uint8_t v) {
  uint32_t sign = (v & 0x80u) ? 1u : 0u;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  float out;
  if (exp == 0xfu && mant == 0x7u) return bits_float(0x7fc00000u);
  if (exp == 0) out = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9
  else out = bits_float(((exp + 120u) << 23) | (mant << 20));
  return sign ? -out : out;
}

/// FP8 E5M2 (IEEE-like: infinities at 0x7c/0xfc, NaN above them, max 57344) to float.
PKB_HD float fp8e5m2_to_float(uint8_t v) {
  uint32_t sign = (v & 0x80u) ? 1u : 0u;
  uint32_t exp = (v >> 2) & 0x1fu;
  uint32_t mant = v & 0x3u;
  float out;
  if (exp == 0x1fu) out = mant ? bits_float(0x7fc00000u) : bits_float(0x7f800000u);
  else if (exp == 0) out = static_cast<float>(mant) * 1.52587890625e-05f;  // mant * 2^-16
  else out = bits_float(((exp + 112u) << 23) | (mant << 21));
  return sign ? -out : out;
}

/// float -> an FP8 type with `E` exponent and `M` mantissa bits, round to nearest even, the way
/// PyTorch's .to(float8_*) rounds. Past the largest finite value E4M3 ("fn", no infinities)
/// gives NaN (above 464, which still rounds to 448), E5M2 infinity; NaN stays NaN (0x7f).
template <int E, int M, bool kFiniteOnly>
PKB_HD uint8_t float_to_fp8(float f) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr uint32_t kNaN = 0x7fu;
  constexpr uint32_t kInf = (((1u << E) - 1u) << M);  // E5M2's infinity; E4M3 has none
  constexpr uint32_t kMaxFinite = kFiniteOnly ? 0x7eu : kInf - 1u;
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | kNaN);
  int exp = static_cast<int>(abs >> 23) - 127;  // float subnormals are far below every FP8 value
  uint32_t code;
  if (abs == 0 || exp < -kBias - M - 1) {  // below half the smallest subnormal (or zero)
    code = 0;
  } else if (exp < 1 - kBias) {  // an FP8 subnormal: the value in steps of 2^(1 - bias - M)
    uint64_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 23 + (1 - kBias - M) - exp;
    uint64_t q = mant >> shift, rem = mant & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    code = static_cast<uint32_t>(q + (rem > half || (rem == half && (q & 1u))));  // 2^M carries into the normals
  } else if (exp > kBias + (kFiniteOnly ? 1 : 0)) {  // far past the largest finite value
    code = kFiniteOnly ? kNaN : kInf;
  } else {  // a normal: the float's exponent and top M mantissa bits, rounded, then rebiased
    constexpr int kShift = 23 - M;
    uint32_t q = abs >> kShift, rem = abs & ((1u << kShift) - 1u), half = 1u << (kShift - 1);
    q += rem > half || (rem == half && (q & 1u));
    code = q - (static_cast<uint32_t>(127 - kBias) << M);
  }
  if (code > kMaxFinite) code = kFiniteOnly ? kNaN : kInf;
  return static_cast<uint8_t>(sign | code);
}

PKB_HD uint8_t float_to_fp8e4m3(float f) { return float_to_fp8<4, 3, true>(f); }
PKB_HD uint8_t float_to_fp8e5m2(float f) { return float_to_fp8<5, 2, false>(f); }

}  // namespace pkb::num
