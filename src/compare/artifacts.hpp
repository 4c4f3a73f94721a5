// `pkb compare A B` on two artifact directories (`pkb eval/run --dump`): every safetensors file
// matched by its path relative to the directory, every tensor by name, each pair compared under
// the rule of eval/compare.hpp with A as the expected side: the output's own rule where A's dump
// states it (exact, or |b - a| <= atol + rtol*|a| with its atol and rtol), else the given tolerance.
// Findings are plain data; format_* turn them into text (PKB's compare_outputs).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "eval/compare.hpp"
#include "spec/spec.hpp"

namespace pkb {

enum class FindingKind {
  agree,  // every element within tolerance
  differ,  // some element outside it
  only_in_a,  // a file or tensor B lacks (a missing rank, a missing output)
  only_in_b,
  shape_differs,
  dtype_differs,
  unreadable,  // not a valid safetensors file
};

std::string_view to_string(FindingKind k);

struct TensorFinding {
  std::string file;  // relative path, e.g. "trial_0/rank_1.safetensors"
  std::string tensor;  // e.g. "output.out"; empty for a finding about the whole file
  FindingKind kind = FindingKind::agree;
  DType dtype = DType::fp32;
  std::vector<long long> shape;
  CompareStats stats;  // agree, differ
  bool bitwise_equal = false;
  std::string detail;  // shapes or dtypes of both sides, a read error
};

/// Which of `pkb compare`'s --atol and --rtol were given: those replace the values A's dump states.
struct GivenTolerance {
  bool atol = true, rtol = true;
};

struct ArtifactComparison {
  std::filesystem::path a, b;
  Tolerance tol;
  GivenTolerance given;
  size_t own_rules = 0;  // tensors compared under the rule A's dump states for them
  size_t files = 0;  // matched pairs of files
  std::vector<TensorFinding> findings;
  std::vector<std::string> notes;  // e.g. the two dumps used different seeds
  /// True when there is at least one tensor and every finding is `agree`.
  bool all_agree() const;
};

/// Compares two artifact directories. A tensor for which A's file states a rule (pkb's --dump
/// writes each output's: exact, or its atol and rtol) is held to it, with `tol`'s atol and rtol in place of
/// the stated ones where `given` says so; any other tensor to `tol` (exact for integer and bool ones). Throws
/// Error(invalid_argument) when either is not a directory or neither holds a .safetensors file;
/// everything else is a finding.
ArtifactComparison compare_artifact_dirs(const std::filesystem::path& a, const std::filesystem::path& b, Tolerance tol,
                                         GivenTolerance given = {});

/// One line per tensor (and per missing file), then a count line.
std::string format_artifact_comparison(const ArtifactComparison& c);

/// Shapes, dtypes, min/max/mean and the first `values` elements of every tensor of every
/// safetensors file under `path` (a directory or one file), with the file's metadata.
std::string format_inspection(const std::filesystem::path& path, int values = 8);

}  // namespace pkb
