// Element-wise comparison of an output with its expected value under the output's Comparison
// (spec/spec.hpp): within a tolerance, |got - expected| <= atol + rtol * |expected|, or exact
// (equal values; integers bit for bit). NaN must meet NaN, an infinity the same infinity, and an
// element still holding the poison pattern is "unwritten". The worst element is reported. Held-out
// calls add a norm-wise bound (Comparison::norm_rtol, spec/spec.hpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "spec/spec.hpp"

namespace pkb {

struct CompareStats {
  size_t numel = 0;
  size_t mismatches = 0;  // elements outside the tolerance (unwritten ones included)
  size_t unwritten = 0;  // elements equal to the poison pattern
  size_t nonfinite = 0;  // NaN/Inf where the expected value is finite
  double max_abs = 0, max_rel = 0;
  long long first_bad = -1;  // flat index of the first mismatching element
  double got = 0, expected = 0;
  // Under a norm-wise bound (Comparison::norm_rtol > 0):
  double norm_rtol = 0, rel_l2 = 0;  // the bound; ||got - expected||_2 / ||expected||_2
  size_t soft = 0;  // elements outside the tolerance but within the gross bound
  bool norm_failed = false;  // rel_l2 > norm_rtol (soft elements then count as mismatches)
  bool ok() const { return mismatches == 0 && !norm_failed; }
};

/// Whether one element passes: NaN meets NaN, an infinity the same infinity, any other non-finite
/// `got` fails, else `c`'s element-wise rule decides (integers as doubles; no norm-wise bound, which
/// needs the whole output: compare_bytes).
bool element_ok(double got, double expected, const Comparison& c);

/// Compares raw output bytes with raw expected bytes of the same dtype.
CompareStats compare_bytes(std::string_view got, std::string_view expected, DType dtype, const Comparison& c,
                           std::optional<uint64_t> poison = std::nullopt);
/// Compares raw output bytes with expected values in double precision (an oracle).
CompareStats compare_to_values(std::string_view got, DType dtype, const std::vector<double>& expected, const Comparison& c,
                               std::optional<uint64_t> poison = std::nullopt);
/// The same under a problem-level tolerance, as an output that declares nothing is compared:
/// `tol` for floating dtypes, exact for integer and bool ones (default_comparison).
CompareStats compare_bytes(std::string_view got, std::string_view expected, DType dtype, Tolerance tol,
                           std::optional<uint64_t> poison = std::nullopt);
CompareStats compare_to_values(std::string_view got, DType dtype, const std::vector<double>& expected, Tolerance tol,
                               std::optional<uint64_t> poison = std::nullopt);

/// "[2, 17, 5]" for a flat index into a row-major shape.
std::string format_index(long long flat, const std::vector<long long>& shape);

/// One line describing a failed comparison: where, got vs expected, how many.
std::string describe_mismatch(const CompareStats& s, const std::vector<long long>& shape);

nlohmann::json to_json(const CompareStats& s, const std::vector<long long>& shape);

}  // namespace pkb
