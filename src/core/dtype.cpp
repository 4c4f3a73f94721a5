#include "core/dtype.hpp"

#include <array>

namespace pkb {

namespace {
struct Names {
  DType d;
  std::string_view name, safetensors;
};
constexpr std::array<Names, 11> kNames{{
    {DType::bf16, "bf16", "BF16"},
    {DType::fp16, "fp16", "F16"},
    {DType::fp32, "fp32", "F32"},
    {DType::fp64, "fp64", "F64"},
    {DType::i8, "int8", "I8"},
    {DType::u8, "uint8", "U8"},
    {DType::i32, "int32", "I32"},
    {DType::i64, "int64", "I64"},
    {DType::boolean, "bool", "BOOL"},
    {DType::fp8_e4m3, "fp8_e4m3", "F8_E4M3"},
    {DType::fp8_e5m2, "fp8_e5m2", "F8_E5M2"},
}};
}  // namespace

std::string_view to_string(DType d) {
  for (auto& n : kNames)
    if (n.d == d) return n.name;
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (auto& n : kNames)
    if (n.name == s) return n.d;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16" || s == "half") return DType::fp16;
  if (s == "float32" || s == "float") return DType::fp32;
  if (s == "float64" || s == "double") return DType::fp64;
  if (s == "long") return DType::i64;
  if (s == "int") return DType::i32;
  if (s == "float8_e4m3fn") return DType::fp8_e4m3;
  if (s == "float8_e5m2") return DType::fp8_e5m2;
  return std::nullopt;
}

std::string dtype_names() {
  std::string out;
  for (auto& n : kNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

std::string_view safetensors_name(DType d) {
  for (auto& n : kNames)
    if (n.d == d) return n.safetensors;
  return "unknown";
}

std::optional<DType> parse_safetensors_dtype(std::string_view s) {
  for (auto& n : kNames)
    if (n.safetensors == s) return n.d;
  return std::nullopt;
}

}  // namespace pkb
