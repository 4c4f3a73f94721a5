// Bytes as lowercase hex and back, for binary values carried in JSON messages (CUDA IPC handles).
#pragma once
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace pkb {

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

/// Throws Error(protocol_error) on an odd length or a character that is not a hex digit.
inline std::string from_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2) fail(Errc::protocol_error, "hex string of odd length");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) fail(Errc::protocol_error, "not a hex string");
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace pkb
