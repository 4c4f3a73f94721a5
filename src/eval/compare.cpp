#include "eval/compare.hpp"

#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "core/poison.hpp"

namespace pkb {

namespace {

/// Within `c`, for a finite expected value and a finite `got`.
bool within(double got, double expected, const Comparison& c) {
  if (c.exact()) return got == expected;
  return std::fabs(got - expected) <= c.tol.atol + c.tol.rtol * std::fabs(expected);
}

/// `same_bits(i)`: the exact verdict for element i where doubles cannot give it (int64 beyond 2^53);
/// nullopt elsewhere. Under a norm-wise bound (c.norm_rtol > 0) the relative L2 error must be within
/// the bound, and an element outside `c.tol` but within the gross bound is "soft": it passes then.
template <typename Expected, typename SameBits>
CompareStats compare_core(std::string_view got, DType dtype, size_t numel, Expected&& expected, SameBits&& same_bits,
                          const Comparison& c, std::optional<uint64_t> poison) {
  CompareStats s;
  s.numel = numel;
  const size_t esz = dtype_size(dtype);
  if (got.size() != numel * esz) fail(Errc::internal, "compare: buffer size does not match its shape");
  const bool norm = c.norm_rtol > 0 && !c.exact();
  double sum_e2 = 0, sum_d2 = 0, gross = 0;
  if (norm) {
    size_t finite = 0;
    for (size_t i = 0; i < numel; ++i)
      if (double e = expected(i); std::isfinite(e)) {
        sum_e2 += e * e;
        ++finite;
      }
    gross = finite ? 16.0 * c.norm_rtol * std::sqrt(sum_e2 / static_cast<double>(finite)) : 0.0;
  }
  size_t soft = 0;
  long long first_soft = -1;
  double soft_got = 0, soft_expected = 0;
  for (size_t i = 0; i < numel; ++i) {
    double e = expected(i);
    double g = load_as_double(got.data(), dtype, i);
    bool bad = false;
    if (poison && element_bits_at(got.data(), esz, i) == (*poison & (esz == 8 ? ~0ull : ((1ull << (8 * esz)) - 1)))) {
      ++s.unwritten;
      bad = true;
    } else if (std::isnan(e)) {
      bad = !std::isnan(g);
    } else if (std::isinf(e)) {
      bad = g != e;
    } else if (!std::isfinite(g)) {
      ++s.nonfinite;
      bad = true;
    } else {
      double diff = std::fabs(g - e);
      s.max_abs = std::max(s.max_abs, diff);
      if (e != 0.0) s.max_rel = std::max(s.max_rel, diff / std::fabs(e));
      sum_d2 += diff * diff;
      if (auto same = same_bits(i)) bad = !*same;
      else bad = !within(g, e, c);
      if (bad && norm && diff <= c.tol.atol + c.tol.rtol * std::fabs(e) + gross) {
        bad = false;
        if (soft++ == 0) {
          first_soft = static_cast<long long>(i);
          soft_got = g;
          soft_expected = e;
        }
      }
    }
    if (bad) {
      if (s.first_bad < 0) {
        s.first_bad = static_cast<long long>(i);
        s.got = g;
        s.expected = e;
      }
      ++s.mismatches;
    }
  }
  if (norm) {
    s.norm_rtol = c.norm_rtol;
    s.rel_l2 = sum_e2 > 0 ? std::sqrt(sum_d2 / sum_e2) : (sum_d2 > 0 ? INFINITY : 0.0);
    s.soft = soft;
    if (s.rel_l2 > c.norm_rtol) {
      s.norm_failed = true;
      if (s.first_bad < 0 && soft) {
        s.first_bad = first_soft;
        s.got = soft_got;
        s.expected = soft_expected;
      }
      s.mismatches += soft;
    }
  }
  return s;
}

std::optional<bool> no_bits(size_t) { return std::nullopt; }

}  // namespace

bool element_ok(double got, double expected, const Comparison& c) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::isfinite(got) && within(got, expected, c);
}

CompareStats compare_bytes(std::string_view got, std::string_view expected, DType dtype, const Comparison& c,
                           std::optional<uint64_t> poison) {
  if (got.size() != expected.size()) fail(Errc::internal, "compare: sizes differ");
  const size_t esz = dtype_size(dtype);
  size_t numel = got.size() / esz;
  // Exact integers compare their bits: an int64 beyond 2^53 has no exact double. (bool compares as
  // a truth value, floats as values: -0 equals +0.)
  bool bits = c.exact() && !is_floating(dtype) && dtype != DType::boolean;
  auto same_bits = [&](size_t i) -> std::optional<bool> {
    if (!bits) return std::nullopt;
    return element_bits_at(got.data(), esz, i) == element_bits_at(expected.data(), esz, i);
  };
  return compare_core(
      got, dtype, numel, [&](size_t i) { return load_as_double(expected.data(), dtype, i); }, same_bits, c, poison);
}

CompareStats compare_to_values(std::string_view got, DType dtype, const std::vector<double>& expected, const Comparison& c,
                               std::optional<uint64_t> poison) {
  return compare_core(
      got, dtype, expected.size(), [&](size_t i) { return expected[i]; }, no_bits, c, poison);
}

CompareStats compare_bytes(std::string_view got, std::string_view expected, DType dtype, Tolerance tol,
                           std::optional<uint64_t> poison) {
  return compare_bytes(got, expected, dtype, default_comparison(dtype, tol), poison);
}

CompareStats compare_to_values(std::string_view got, DType dtype, const std::vector<double>& expected, Tolerance tol,
                               std::optional<uint64_t> poison) {
  return compare_to_values(got, dtype, expected, default_comparison(dtype, tol), poison);
}

std::string format_index(long long flat, const std::vector<long long>& shape) {
  if (shape.empty()) return "[]";
  std::vector<long long> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    long long n = std::max(shape[d], 1ll);
    idx[d] = flat % n;
    flat /= n;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) out += (d ? ", " : "") + std::to_string(idx[d]);
  return out + "]";
}

std::string describe_mismatch(const CompareStats& s, const std::vector<long long>& shape) {
  char buf[384];
  if (s.norm_failed && s.mismatches == s.soft) {
    if (s.soft)
      std::snprintf(buf, sizeof buf,
                    "held-out inputs: relative L2 error %.3g exceeds %.3g, with %zu of %zu elements outside the tolerance; first "
                    "at %s: got %.6g, expected %.6g",
                    s.rel_l2, s.norm_rtol, s.soft, s.numel, format_index(s.first_bad, shape).c_str(), s.got, s.expected);
    else
      std::snprintf(buf, sizeof buf,
                    "held-out inputs: relative L2 error %.3g exceeds %.3g (every element within the tolerance; max abs err %.3g)",
                    s.rel_l2, s.norm_rtol, s.max_abs);
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "%zu of %zu elements wrong (%zu unwritten, %zu non-finite); first at %s: got %.6g, expected %.6g; max abs err "
                "%.3g, max rel err %.3g",
                s.mismatches, s.numel, s.unwritten, s.nonfinite, format_index(s.first_bad, shape).c_str(), s.got, s.expected,
                s.max_abs, s.max_rel);
  return buf;
}

nlohmann::json to_json(const CompareStats& s, const std::vector<long long>& shape) {
  nlohmann::json j{{"numel", s.numel},         {"mismatches", s.mismatches}, {"unwritten", s.unwritten},
                   {"nonfinite", s.nonfinite}, {"max_abs_err", s.max_abs},   {"max_rel_err", s.max_rel}};
  if (s.norm_rtol > 0) j["heldout"] = {{"rel_l2_err", s.rel_l2}, {"bound", s.norm_rtol}, {"outside_tolerance", s.soft}};
  if (s.first_bad >= 0) {
    j["first_mismatch"] = {{"index", format_index(s.first_bad, shape)}, {"got", s.got}, {"expected", s.expected}};
  }
  return j;
}

}  // namespace pkb
