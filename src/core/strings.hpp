// Small string helpers: edit distance for "did you mean", human-readable sizes, splitting.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

/// Levenshtein distance (insert, delete, substitute), as ninja's "did you mean".
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidates closest to `word` (distance <= max(2, len/3)), best first, at most `limit`.
std::vector<std::string> closest_matches(std::string_view word, const std::vector<std::string>& candidates, size_t limit = 3);

/// "8K", "1M", "2G", "1048576" -> bytes (binary units, as nccl-tests).
std::optional<uint64_t> parse_size(std::string_view s);
/// 1536 -> "1.5 KiB"
std::string format_bytes(double bytes);

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);

}  // namespace pkb
