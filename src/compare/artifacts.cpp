#include "compare/artifacts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/ragged.hpp"
#include "report/safetensors.hpp"

namespace pkb {

namespace fs = std::filesystem;

std::string_view to_string(FindingKind k) {
  switch (k) {
    case FindingKind::agree: return "agree";
    case FindingKind::differ: return "DIFFER";
    case FindingKind::only_in_a: return "only in A";
    case FindingKind::only_in_b: return "only in B";
    case FindingKind::shape_differs: return "shape differs";
    case FindingKind::dtype_differs: return "dtype differs";
    case FindingKind::unreadable: return "unreadable";
  }
  return "?";
}

bool ArtifactComparison::all_agree() const {
  return !findings.empty() &&
         std::all_of(findings.begin(), findings.end(), [](const TensorFinding& f) { return f.kind == FindingKind::agree; });
}

namespace {

/// "rank_10" after "rank_9": digit runs compare by value.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      long long x = std::stoll(a.substr(i, std::min<size_t>(i2 - i, 18))),
                y = std::stoll(b.substr(j, std::min<size_t>(j2 - j, 18)));
      if (x != y) return x < y;
      i = i2, j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

/// Relative paths of every .safetensors file under dir, in natural order.
std::vector<std::string> safetensors_under(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end(), natural_less);
  return out;
}

std::string shape_text(DType d, const std::vector<long long>& shape) {
  std::string s = std::string(to_string(d)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// A's held-out bound for tensor `name` (dumped as "heldout_rtol.<name>" for a held-out trial's
/// outputs), or 0.
double heldout_rtol_of(const SafetensorsFile& a, const std::string& name) {
  auto it = a.metadata.find("heldout_rtol." + name);
  if (it == a.metadata.end()) return 0.0;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    return 0.0;
  }
}

/// The rule A's dump states for tensor `name` ("compare.<name>": "exact" or "atol rtol", written
/// by pkb's --dump from the spec), with `tol`'s atol (rtol) in place of the stated one where
/// `given` says so (--atol/--rtol replace floating tolerances; exact stays exact); without a stated
/// rule, `tol` as an output that declares nothing is compared.
Comparison rule_of(const SafetensorsFile& a, const NamedTensor& t, Tolerance tol, GivenTolerance given) {
  Comparison c = default_comparison(t.dtype, tol);
  auto it = a.metadata.find("compare." + t.name);
  if (it == a.metadata.end()) return c;
  if (it->second == "exact") {
    c.mode = CompareMode::exact;
  } else {
    double atol = 0, rtol = 0;
    if (std::sscanf(it->second.c_str(), "%lf %lf", &atol, &rtol) != 2 || atol < 0 || rtol < 0)
      fail(Errc::invalid_argument,
           "compare." + t.name + " in A's metadata is neither \"exact\" nor \"atol rtol\": " + it->second);
    c.mode = CompareMode::tolerance;
    c.tol = {given.atol ? tol.atol : atol, given.rtol ? tol.rtol : rtol};
  }
  auto nf = a.metadata.find("nonfinite." + t.name);
  c.nonfinite_as_expected = nf != a.metadata.end() && nf->second == "as_expected";
  return c;
}

TensorFinding compare_tensors(const std::string& file, const NamedTensor& a, const NamedTensor& b, Comparison c,
                              double heldout_rtol) {
  TensorFinding f{file, a.name, FindingKind::agree, a.dtype, a.shape, {}, false, {}};
  if (a.dtype != b.dtype) {
    f.kind = FindingKind::dtype_differs;
    f.detail = fmt::format("A {}, B {}", to_string(a.dtype), to_string(b.dtype));
  } else if (a.shape != b.shape) {
    f.kind = FindingKind::shape_differs;
    f.detail = fmt::format("A {}, B {}", shape_text(a.dtype, a.shape), shape_text(b.dtype, b.shape));
  } else {
    f.bitwise_equal = a.bytes == b.bytes;
    c.heldout_rtol = heldout_rtol;
    f.stats = compare_bytes(b.bytes, a.bytes, a.dtype, for_call(c, heldout_rtol > 0));  // A is the expected side
    f.kind = f.stats.ok() ? FindingKind::agree : FindingKind::differ;
  }
  return f;
}

/// A ragged output's counted rows in dump `f`, where A's dump says "count.<name>" (the tensor that
/// holds its row count: one int32/int64 element); the whole tensor otherwise.
NamedTensor counted_rows(const SafetensorsFile& a, const SafetensorsFile& f, const NamedTensor& t, bool& ragged) {
  ragged = false;
  auto it = a.metadata.find("count." + t.name);
  if (it == a.metadata.end() || t.shape.empty()) return t;
  const NamedTensor* c = f.find(it->second);
  if (!c || (c->dtype != DType::i32 && c->dtype != DType::i64) || c->bytes.size() != dtype_size(c->dtype)) return t;
  ragged = true;
  size_t row = row_elems(t.shape);
  size_t n = counted_elems(load_count(c->bytes.data(), c->dtype), static_cast<size_t>(t.shape[0]), row);
  NamedTensor out = t;
  out.bytes.resize(std::min(out.bytes.size(), n * dtype_size(t.dtype)));
  out.shape[0] = row ? static_cast<long long>(n / row) : 0;
  return out;
}

void compare_files(const fs::path& a, const fs::path& b, const std::string& rel, Tolerance tol, GivenTolerance given,
                   ArtifactComparison& out) {
  SafetensorsFile fa, fb;
  for (auto [path, file, side] : {std::tuple{a / rel, &fa, "A"}, std::tuple{b / rel, &fb, "B"}}) {
    try {
      *file = read_safetensors(path);
    } catch (const Error& e) {
      out.findings.push_back({rel, "", FindingKind::unreadable, DType::fp32, {}, {}, false, std::string(side) + ": " + e.what()});
      return;
    }
  }
  ++out.files;
  for (auto& ta : fa.tensors) {
    const NamedTensor* tb = fb.find(ta.name);
    if (!tb) {
      out.findings.push_back({rel, ta.name, FindingKind::only_in_a, ta.dtype, ta.shape, {}, false, {}});
      continue;
    }
    TensorFinding f;
    try {
      bool ragged_a = false, ragged_b = false;
      NamedTensor ca = counted_rows(fa, fa, ta, ragged_a), cb = counted_rows(fa, fb, *tb, ragged_b);
      f = compare_tensors(rel, ca, cb, rule_of(fa, ta, tol, given), heldout_rtol_of(fa, ta.name));
      if (ragged_a && ragged_b && f.kind == FindingKind::shape_differs && ca.dtype == cb.dtype &&
          ta.shape == tb->shape) {  // same capacity, different counts
        f.kind = FindingKind::differ;
        f.shape = ta.shape;
        f.detail = fmt::format("counted rows differ: A {}, B {}", ca.shape[0], cb.shape[0]);
      }
    } catch (const Error& e) {
      f = {rel, ta.name, FindingKind::unreadable, ta.dtype, ta.shape, {}, false, std::string("A: ") + e.what()};
    }
    if (fa.metadata.count("compare." + ta.name)) ++out.own_rules;
    out.findings.push_back(std::move(f));
  }
  for (auto& tb : fb.tensors)
    if (!fa.find(tb.name)) out.findings.push_back({rel, tb.name, FindingKind::only_in_b, tb.dtype, tb.shape, {}, false, {}});
  auto sa = fa.metadata.find("seed"), sb = fb.metadata.find("seed");
  if (sa != fa.metadata.end() && sb != fb.metadata.end() && sa->second != sb->second) {
    std::string note = "A and B were dumped with different seeds (" + sa->second + " vs " + sb->second +
                       "): their inputs differ, so their outputs are not expected to agree";
    if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end()) out.notes.push_back(note);
  }
}

}  // namespace

ArtifactComparison compare_artifact_dirs(const fs::path& a, const fs::path& b, Tolerance tol, GivenTolerance given) {
  for (auto& d : {a, b}) {
    std::error_code ec;
    if (!fs::exists(d, ec)) fail(Errc::invalid_argument, d.string() + " does not exist");
    if (!fs::is_directory(d, ec))
      fail(Errc::invalid_argument, d.string() + " is not a directory (artifacts come from --dump DIR)");
  }
  ArtifactComparison c{a, b, tol, given};
  std::vector<std::string> fa = safetensors_under(a), fb = safetensors_under(b);
  if (fa.empty() && fb.empty())
    fail(Errc::invalid_argument, "neither " + a.string() + " nor " + b.string() + " holds a .safetensors file");
  std::set<std::string> in_b(fb.begin(), fb.end());
  for (auto& rel : fa) {
    if (in_b.count(rel)) compare_files(a, b, rel, tol, given, c);
    else
      c.findings.push_back(
          {rel, "", FindingKind::only_in_a, DType::fp32, {}, {}, false, "missing in B (a rank or trial B did not dump)"});
  }
  std::set<std::string> in_a(fa.begin(), fa.end());
  for (auto& rel : fb)
    if (!in_a.count(rel))
      c.findings.push_back(
          {rel, "", FindingKind::only_in_b, DType::fp32, {}, {}, false, "missing in A (a rank or trial A did not dump)"});
  return c;
}

std::string format_artifact_comparison(const ArtifactComparison& c) {
  std::string rule = fmt::format("|b - a| <= {} + {} * |a|", c.tol.atol, c.tol.rtol);
  if (c.own_rules)
    rule = c.given.atol || c.given.rtol
               ? fmt::format("each output's rule from A's dump, with --atol/--rtol in place of its own; others {}", rule)
               : "each output's rule from A's dump (exact or its own atol, rtol); others " + rule;
  std::string o = fmt::format("pkb compare {} {}  (A expected, B checked: {})\n", c.a.string(), c.b.string(), rule);
  std::map<FindingKind, int> counts;
  for (auto& f : c.findings) {
    ++counts[f.kind];
    std::string what = f.tensor.empty() ? "" : f.tensor;
    std::string type = f.shape.empty() && f.tensor.empty() ? "" : shape_text(f.dtype, f.shape);
    std::string detail = f.detail;
    if (f.kind == FindingKind::agree)
      detail = f.bitwise_equal ? "bitwise equal"
                               : fmt::format("max abs err {:.3g}, max rel err {:.3g}", f.stats.max_abs, f.stats.max_rel);
    if (f.kind == FindingKind::differ && detail.empty()) detail = describe_mismatch(f.stats, f.shape);
    o += fmt::format("  {:<30} {:<16} {:<22} {:<13} {}\n", f.file, what, type, to_string(f.kind), detail);
  }
  for (auto& n : c.notes) o += "  note: " + n + "\n";
  std::string tally;
  for (auto& [k, n] : counts) tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", n, to_string(k));
  o += fmt::format("{} file pair{} compared, {} finding{}: {}\n", c.files, c.files == 1 ? "" : "s", c.findings.size(),
                   c.findings.size() == 1 ? "" : "s", tally.empty() ? "none" : tally);
  return o;
}

namespace {

std::string tensor_summary(const NamedTensor& t, int values) {
  size_t n = t.bytes.size() / dtype_size(t.dtype);
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; ++i) {
    double v = load_as_double(t.bytes.data(), t.dtype, i);
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v, ++finite;
  }
  std::string first;
  for (size_t i = 0; i < n && i < static_cast<size_t>(values); ++i)
    first += fmt::format("{}{:.6g}", i ? ", " : "", load_as_double(t.bytes.data(), t.dtype, i));
  std::string stats =
      finite ? fmt::format("min {:.6g} max {:.6g} mean {:.6g}", lo, hi, sum / static_cast<double>(finite)) : "no finite value";
  if (finite < n) stats += fmt::format(", {} non-finite", n - finite);
  return fmt::format("    {:<20} {:<24} {}; first: [{}{}]\n", t.name, shape_text(t.dtype, t.shape), stats, first,
                     n > static_cast<size_t>(values) ? ", ..." : "");
}

}  // namespace

std::string format_inspection(const fs::path& path, int values) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(Errc::invalid_argument, path.string() + " does not exist");
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (auto& rel : safetensors_under(path)) files.push_back(path / rel);
  } else {
    files.push_back(path);
  }
  std::string o;
  for (auto& f : files) {
    SafetensorsFile st = read_safetensors(f);
    std::string meta;
    for (auto& [k, v] : st.metadata) meta += fmt::format("{}{}={}", meta.empty() ? "" : " ", k, v);
    o += fmt::format("  {}{}\n", f.string(), meta.empty() ? "" : "  (" + meta + ")");
    for (auto& t : st.tensors) o += tensor_summary(t, values);
  }
  if (files.empty()) o += "  no .safetensors file under " + path.string() + "\n";
  return o;
}

}  // namespace pkb
