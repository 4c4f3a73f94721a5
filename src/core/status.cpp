#include "core/status.hpp"

#include <array>

namespace pkb {

namespace {
constexpr std::array<std::pair<Status, std::string_view>, 11> kNames{{
    {Status::ok, "ok"},
    {Status::compile_error, "compile_error"},
    {Status::load_error, "load_error"},
    {Status::runtime_error, "runtime_error"},
    {Status::mismatch, "mismatch"},
    {Status::crash, "crash"},
    {Status::timeout, "timeout"},
    {Status::protocol_error, "protocol_error"},
    {Status::harness_error, "harness_error"},
    {Status::flagged, "flagged"},
    {Status::unsupported, "unsupported"},
}};
}  // namespace

std::string_view to_string(Status s) {
  for (auto& [k, v] : kNames)
    if (k == s) return v;
  return "unknown";
}

std::optional<Status> parse_status(std::string_view s) {
  for (auto& [k, v] : kNames)
    if (v == s) return k;
  return std::nullopt;
}

}  // namespace pkb
