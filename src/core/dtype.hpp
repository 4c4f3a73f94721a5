// Element types. The enumerators match pkb_dtype in include/pkb/solution.h (the ABI numbering).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dist.hpp"
#include "core/hd.hpp"
#include "core/numeric.hpp"

namespace pkb {

enum class DType : int32_t {
  bf16 = 0,
  fp16 = 1,
  fp32 = 2,
  fp64 = 3,
  i8 = 4,
  u8 = 5,
  i32 = 6,
  i64 = 7,
  boolean = 8,
  fp8_e4m3 = 9,
  fp8_e5m2 = 10,
};

PKB_HD size_t dtype_size(DType d) {
  switch (d) {
    case DType::bf16:
    case DType::fp16: return 2;
    case DType::fp32:
    case DType::i32: return 4;
    case DType::fp64:
    case DType::i64: return 8;
    default: return 1;
  }
}

PKB_HD bool is_floating(DType d) {
  return d == DType::bf16 || d == DType::fp16 || d == DType::fp32 || d == DType::fp64 || d == DType::fp8_e4m3 ||
         d == DType::fp8_e5m2;
}

/// Short name used in specs, CLI and records: bf16, fp16, fp32, fp64, int8, uint8, int32, int64,
/// bool, fp8_e4m3, fp8_e5m2.
std::string_view to_string(DType d);
/// Accepts the short names and the PyTorch spellings (bfloat16, float16, half, float32, float, ...).
std::optional<DType> parse_dtype(std::string_view s);
/// Every dtype name parse_dtype accepts first, comma-separated, for error messages.
std::string dtype_names();
/// The safetensors dtype tag (BF16, F16, F32, ...).
std::string_view safetensors_name(DType d);
std::optional<DType> parse_safetensors_dtype(std::string_view s);

/// Element `i` of a host buffer of type `d`, widened to double.
PKB_HD double load_as_double(const void* base, DType d, size_t i) {
  switch (d) {
    case DType::bf16: return num::bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::fp16: return num::fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::fp32: return static_cast<const float*>(base)[i];
    case DType::fp64: return static_cast<const double*>(base)[i];
    case DType::i8: return static_cast<const int8_t*>(base)[i];
    case DType::u8: return static_cast<const uint8_t*>(base)[i];
    case DType::i32: return static_cast<const int32_t*>(base)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::boolean: return static_cast<const uint8_t*>(base)[i] ? 1.0 : 0.0;
    case DType::fp8_e4m3: return num::fp8e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
    case DType::fp8_e5m2: return num::fp8e5m2_to_float(static_cast<const uint8_t*>(base)[i]);
  }
  return 0.0;
}

/// Store `v` (rounded to nearest even for narrow floats, truncated for integers) as element `i`.
PKB_HD void store_from_double(void* base, DType d, size_t i, double v) {
  switch (d) {
    case DType::bf16: static_cast<uint16_t*>(base)[i] = num::float_to_bf16(static_cast<float>(v)); break;
    case DType::fp16: static_cast<uint16_t*>(base)[i] = num::float_to_fp16(static_cast<float>(v)); break;
    case DType::fp32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::fp64: static_cast<double*>(base)[i] = v; break;
    case DType::i8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DType::u8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DType::i32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DType::boolean: static_cast<uint8_t*>(base)[i] = v != 0.0; break;
    case DType::fp8_e4m3: static_cast<uint8_t*>(base)[i] = num::float_to_fp8e4m3(static_cast<float>(v)); break;
    case DType::fp8_e5m2: static_cast<uint8_t*>(base)[i] = num::float_to_fp8e5m2(static_cast<float>(v)); break;
  }
}

/// Generate element `index` of a tensor of type `d` with distribution `dist` and key `key`.
/// This one function defines every input the harness ever produces, on host and device alike.
PKB_HD void generate_element(void* base, DType d, const Dist& dist, uint64_t key, uint64_t index) {
  switch (d) {  // integer tensors: their element bits are drawn inside sample_int_at
    case DType::i8: static_cast<int8_t*>(base)[index] = static_cast<int8_t>(sample_int_at(dist, key, index)); return;
    case DType::u8: static_cast<uint8_t*>(base)[index] = static_cast<uint8_t>(sample_int_at(dist, key, index)); return;
    case DType::i32: static_cast<int32_t*>(base)[index] = static_cast<int32_t>(sample_int_at(dist, key, index)); return;
    case DType::i64: static_cast<int64_t*>(base)[index] = sample_int_at(dist, key, index); return;
    case DType::boolean: static_cast<uint8_t*>(base)[index] = sample_int_at(dist, key, index) != 0; return;
    default: break;
  }
  if (structured(dist)) {  // integer-valued draws (a one-hot mask) in a floating tensor: exact
    store_from_double(base, d, index, static_cast<double>(sample_int_at(dist, key, index)));
    return;
  }
  rng::U32x4 r = rng::element_bits(key, index);
  switch (d) {
    case DType::bf16:
    case DType::fp16:
    case DType::fp32:
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: {  // drawn in float, rounded to the type (fp8: as PyTorch's .to() rounds)
      float v = dist.kind == DistKind::arange ? static_cast<float>(dist.lo + static_cast<int64_t>(index)) : sample_float(dist, r);
      if (d == DType::bf16) static_cast<uint16_t*>(base)[index] = num::float_to_bf16(v);
      else if (d == DType::fp16) static_cast<uint16_t*>(base)[index] = num::float_to_fp16(v);
      else if (d == DType::fp8_e4m3) static_cast<uint8_t*>(base)[index] = num::float_to_fp8e4m3(v);
      else if (d == DType::fp8_e5m2) static_cast<uint8_t*>(base)[index] = num::float_to_fp8e5m2(v);
      else static_cast<float*>(base)[index] = v;
      break;
    }
    case DType::fp64:
      static_cast<double*>(base)[index] =
          dist.kind == DistKind::arange ? static_cast<double>(dist.lo + static_cast<int64_t>(index)) : sample_double(dist, r);
      break;
    default: break;  // integers above
  }
}

}  // namespace pkb
