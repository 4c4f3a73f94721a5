#include "core/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace pkb {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> closest_matches(std::string_view word, const std::vector<std::string>& candidates, size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  size_t max_dist = std::max<size_t>(2, word.size() / 3);
  for (auto& c : candidates) {
    size_t d = edit_distance(word, c);
    // A candidate that contains the word is a good match whatever its length.
    if (c.find(word) != std::string::npos && !word.empty()) d = std::min<size_t>(d, 1);
    if (d <= max_dist) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& x, auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, c] : scored) {
    if (out.size() == limit) break;
    out.push_back(c);
  }
  return out;
}

std::optional<uint64_t> parse_size(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  uint64_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  if (last == 'B') {
    s.remove_suffix(1);
    if (s.empty()) return std::nullopt;
    last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  }
  if (last == 'K') mult = 1ull << 10;
  else if (last == 'M') mult = 1ull << 20;
  else if (last == 'G') mult = 1ull << 30;
  else if (last == 'T') mult = 1ull << 40;
  if (mult != 1) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v * mult;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else std::snprintf(buf, sizeof buf, "%.4g %s", bytes, units[u]);
  return buf;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace pkb
