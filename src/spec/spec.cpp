#include "spec/spec.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/ragged.hpp"

namespace pkb {

namespace {

/// Reads one spec file, naming file and key in every error.
class Reader {
 public:
  explicit Reader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void error(const std::string& key, const std::string& why) const {
    fail(Errc::parse_error, file_.string() + ": " + key + ": " + why);
  }

  /// error(), with the line of `n` where the TOML parser recorded one ("spec.toml:12: key: why").
  [[noreturn]] void error_at(const toml::node& n, const std::string& key, const std::string& why) const {
    if (n.source().begin.line == 0) error(key, why);
    fail(Errc::parse_error, file_.string() + ":" + std::to_string(n.source().begin.line) + ": " + key + ": " + why);
  }

  void only_keys(const toml::table& t, const std::string& where, std::initializer_list<std::string_view> allowed) const {
    for (auto&& [k, v] : t) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        error_at(v, where.empty() ? std::string(k.str()) : where + "." + std::string(k.str()),
                 "unknown key (allowed: " + list + ")");
      }
    }
  }

  std::string str(const toml::table& t, const std::string& where, std::string_view key, bool required,
                  std::string fallback = {}) const {
    auto n = t.get(key);
    if (!n) {
      if (required) error(join(where, key), "missing");
      return fallback;
    }
    if (auto s = n->value<std::string>()) return *s;
    error(join(where, key), "must be a string");
  }

  long long integer(const toml::table& t, const std::string& where, std::string_view key, bool required,
                    long long fallback = 0) const {
    auto n = t.get(key);
    if (!n) {
      if (required) error(join(where, key), "missing");
      return fallback;
    }
    if (auto v = n->value<int64_t>(); v && n->is_integer()) return *v;
    error(join(where, key), "must be an integer");
  }

  /// A number, or a string holding an expression.
  Expr expr(const toml::node& n, const std::string& where) const {
    if (n.is_integer()) {  // expressions are evaluated in double: integers beyond 2^53 would change
      int64_t v = *n.value<int64_t>();
      if (v > (int64_t{1} << 53) || v < -(int64_t{1} << 53))
        error_at(n, where, "integer " + std::to_string(v) + " is beyond 2^53 (expressions are exact only up to there)");
      return Expr::constant(static_cast<double>(v));
    }
    if (n.is_floating_point()) return Expr::constant(*n.value<double>());
    if (auto s = n.value<std::string>()) {
      try {
        return Expr::parse(*s);
      } catch (const Error& e) {
        error(where, e.what());
      }
    }
    error(where, "must be a number or an expression string");
  }

  std::vector<Expr> shape(const toml::node& n, const std::string& where) const {
    auto arr = n.as_array();
    if (!arr) error(where, "must be an array of dimensions, e.g. [\"M\", \"N\"]");
    if (arr->size() > 8) error(where, "at most 8 dimensions");
    std::vector<Expr> out;
    for (size_t i = 0; i < arr->size(); ++i) out.push_back(expr(*arr->get(i), where + "[" + std::to_string(i) + "]"));
    return out;
  }

  static std::string join(const std::string& where, std::string_view key) {
    return where.empty() ? std::string(key) : where + "." + std::string(key);
  }

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

/// An example table of structured draw `kind`, for error messages.
std::string structured_example(const std::string& kind) {
  if (kind == "distinct") return "{ dist = \"distinct\", n = \"E\", k = 2 }";
  if (kind == "owner_ids") return "{ dist = \"owner_ids\", high = \"num_nodes\" }";
  if (kind == "offsets") return "{ dist = \"offsets\", mean = 16 }";
  if (kind == "permutation") return "{ dist = \"permutation\", n = \"num_nodes\" }";
  return "{ dist = \"composition\", mean = 12 }";
}

/// The structured draws (C4): `distinct`, `owner_ids`, `composition`, `offsets` and `permutation`
/// (core/dist.hpp). Shapes and the `of` input are checked when the spec resolves (resolve_structured,
/// link_views).
void parse_structured(const Reader& r, const toml::table* t, const std::string& where, const std::string& kind, DistSpec& d) {
  if (!t) r.error(where, kind + " needs a table, e.g. " + structured_example(kind));
  auto need = [&](std::string_view key, const std::string& why) {
    auto v = t->get(key);
    if (!v) r.error(where + "." + std::string(key), "missing (" + why + ")");
    return r.expr(*v, where + "." + std::string(key));
  };
  if (kind == "distinct") {
    r.only_keys(*t, where, {"dist", "n", "k", "view", "of", "shared_by"});
    d.kind = DistKind::distinct;
    std::string view = r.str(*t, where, "view", false, "values");
    if (view == "values") d.view = DistinctView::values;
    else if (view == "onehot") d.view = DistinctView::onehot;
    else if (view == "mask") d.view = DistinctView::mask;
    else if (view == "grouped") d.view = DistinctView::grouped;
    else r.error(where + ".view", "must be \"values\" [M, k], \"onehot\" [n, k, M], \"mask\" [n, M] or \"grouped\" [k * M]");
    d.of = r.str(*t, where, "of", false);
    if (!d.of.empty()) {
      if (t->get("n") || t->get("k")) r.error(where + ".of", "a view takes n and k from input '" + d.of + "'; drop n and k");
    } else {
      d.lo = need("n", "values are drawn from [0, n)");
      d.hi = need("k", "distinct values per row");
    }
  } else if (kind == "owner_ids") {
    r.only_keys(*t, where, {"dist", "high", "matrix"});
    d.kind = DistKind::owner_ids;
    d.a = need("high", "ids are drawn from [0, high)");
    d.hi = Expr::parse("W");
    d.b = Expr::parse("rank");
    d.matrix = r.integer(*t, where, "matrix", false, 0);
    if (d.matrix < 0) r.error(where + ".matrix", "must be >= 0");
  } else if (kind == "offsets") {
    r.only_keys(*t, where, {"dist", "mean", "shared_by"});
    d.kind = DistKind::offsets;
    d.lo = need("mean", "the mean row length; lengths lie in [0, 2 * mean]");
  } else if (kind == "permutation") {
    r.only_keys(*t, where, {"dist", "n", "shared_by"});
    d.kind = DistKind::permutation;
    d.lo = need("n", "distinct values are drawn from [0, n)");
  } else {
    r.only_keys(*t, where, {"dist", "mean"});
    d.kind = DistKind::composition;
    d.lo = need("mean", "every element's mean; values lie in [0, 2 * mean]");
    d.hi = Expr::parse("W");
    d.b = Expr::parse("rank");
  }
}

DistSpec parse_dist(const Reader& r, const toml::node* n, const std::string& where) {
  DistSpec d;
  d.a = Expr::constant(0.0);
  d.b = Expr::constant(1.0);
  d.lo = Expr::constant(0.0);
  d.hi = Expr::constant(0.0);
  if (!n) return d;  // default: standard normal
  const toml::table* t = n->as_table();
  std::string kind;
  if (auto s = n->value<std::string>()) kind = *s;
  else if (t) kind = r.str(*t, where, "dist", true);
  else r.error(where, "must be a distribution name or a table such as { dist = \"normal\", mean = 0, std = 1 }");
  if (t)
    if (auto sb = t->get("shared_by")) {
      if (kind == "split") r.error(where + ".shared_by", "a split matrix is already the same on every rank");
      if (kind == "owner_ids" || kind == "composition")
        r.error(where + ".shared_by", kind + " draws span every rank (each rank's part differs by design)");
      if (kind == "distinct" && t->get("of")) r.error(where + ".shared_by", "a view (`of`) shares the draw of its input");
      if (!sb->is_string()) r.error(where + ".shared_by", "must be an expression string such as \"rank // 2\"");
      d.shared_by = r.expr(*sb, where + ".shared_by");
    }
  auto field = [&](std::string_view key, double fallback) {
    if (t)
      if (auto v = t->get(key)) return r.expr(*v, where + "." + std::string(key));
    return Expr::constant(fallback);
  };
  if (kind == "normal") {
    if (t) r.only_keys(*t, where, {"dist", "mean", "std", "shared_by"});
    d.kind = DistKind::normal;
    d.a = field("mean", 0.0);
    d.b = field("std", 1.0);
  } else if (kind == "uniform") {
    if (t) r.only_keys(*t, where, {"dist", "low", "high", "shared_by"});
    d.kind = DistKind::uniform;
    d.a = field("low", 0.0);
    d.b = field("high", 1.0);
  } else if (kind == "grid") {
    if (t) r.only_keys(*t, where, {"dist", "low", "high", "scale", "shared_by"});
    d.kind = DistKind::grid;
    d.lo = field("low", -16);
    d.hi = field("high", 16);
    d.a = field("scale", 0.0625);
  } else if (kind == "randint") {
    if (t) r.only_keys(*t, where, {"dist", "low", "high", "shared_by"});
    d.kind = DistKind::randint;
    d.lo = field("low", 0);
    d.hi = field("high", 100);
  } else if (kind == "zeros") {
    d.kind = DistKind::zeros;
  } else if (kind == "ones") {
    d.kind = DistKind::ones;
  } else if (kind == "arange") {
    if (t) r.only_keys(*t, where, {"dist", "start", "shared_by"});
    d.kind = DistKind::arange;
    d.lo = field("start", 0);
  } else if (kind == "split") {
    if (!t) r.error(where, "split needs a table { dist = \"split\", total = \"M\", side = \"send\" }");
    r.only_keys(*t, where, {"dist", "total", "side", "matrix"});
    d.kind = DistKind::split;
    auto total = t->get("total");
    if (!total) r.error(where + ".total", "missing (the sum of every row and column of the split matrix)");
    d.lo = r.expr(*total, where + ".total");
    d.hi = Expr::parse("W");
    d.b = Expr::parse("rank");
    std::string side = r.str(*t, where, "side", true);
    if (side != "send" && side != "recv") r.error(where + ".side", "must be \"send\" (row rank) or \"recv\" (column rank)");
    d.a = Expr::constant(side == "send" ? 0.0 : 1.0);
    d.matrix = r.integer(*t, where, "matrix", false, 0);
    if (d.matrix < 0) r.error(where + ".matrix", "must be >= 0");
  } else if (kind == "distinct" || kind == "owner_ids" || kind == "composition" || kind == "offsets" || kind == "permutation") {
    parse_structured(r, t, where, kind, d);
  } else {
    r.error(where + ".dist", "unknown distribution '" + kind +
                                 "' (normal, uniform, grid, randint, zeros, ones, arange, split, distinct, owner_ids, "
                                 "composition, offsets, permutation)");
  }
  return d;
}

/// One level of a tolerance table: atol and rtol (finite, >= 0) and, where `by_dtype` is given,
/// per-dtype sub-tables of the same keys.
void parse_tolerance_level(const Reader& r, const toml::table& t, const std::string& where, ToleranceSpec::Pair& out,
                           std::vector<std::pair<DType, ToleranceSpec::Pair>>* by_dtype) {
  for (auto&& [k, v] : t) {
    std::string key(k.str()), w = where + "." + key;
    if (key == "atol" || key == "rtol") {
      if (!v.is_integer() && !v.is_floating_point()) r.error_at(v, w, "must be a number");
      // toml++ gives no double for an integer that a double cannot hold exactly (beyond 2^53)
      double x = v.is_integer() ? static_cast<double>(*v.value<int64_t>()) : *v.value<double>();
      if (!std::isfinite(x) || x < 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "must be a finite number >= 0, not %g", x);
        r.error_at(v, w, buf);
      }
      (key == "atol" ? out.atol : out.rtol) = x;
      continue;
    }
    auto d = by_dtype ? parse_dtype(key) : std::nullopt;
    if (!d || !v.is_table())
      r.error_at(
          v, w,
          by_dtype ? "unknown key (atol, rtol, or a per-dtype table such as " + where + ".fp32)" : "unknown key (atol, rtol)");
    for (auto& [seen, p] : *by_dtype)
      if (seen == *d) r.error_at(v, w, "a second table for dtype " + std::string(to_string(*d)));
    ToleranceSpec::Pair sub;
    parse_tolerance_level(r, *v.as_table(), w, sub, nullptr);
    by_dtype->emplace_back(*d, sub);
  }
}

/// A tolerance table: { atol = ..., rtol = ..., fp32 = { atol = ... } }, the problem's [tolerance]
/// or an output's `tolerance`. Keys left out stay unset (the caller decides the fallback).
ToleranceSpec parse_tolerance_table(const Reader& r, const toml::node& n, const std::string& where) {
  auto t = n.as_table();
  if (!t)
    r.error_at(n, where,
               "must be a table { atol = ..., rtol = ... }, optionally with per-dtype tables such as " + where + ".fp32");
  ToleranceSpec ts;
  parse_tolerance_level(r, *t, where, ts.all, &ts.by_dtype);
  return ts;
}

/// An output's comparison keys: `compare = "exact" | "tolerance"` and its own `tolerance` table.
void parse_output_compare(const Reader& r, const toml::table& t, const std::string& where, TensorSpec& ts) {
  for (auto key : {"atol", "rtol"})
    if (auto v = t.get(key))
      r.error_at(*v, where + "." + key, "an output's own tolerance is a table: tolerance = { " + std::string(key) + " = ... }");
  r.only_keys(t, where, {"name", "dtype", "shape", "shape_if", "compare", "tolerance", "nonfinite", "count", "doc"});
  if (auto n = t.get("count")) {
    auto v = n->value<std::string>();
    if (!v || v->empty())
      r.error_at(*n, where + ".count", "must name the output that holds this output's row count (count = \"n_rows\")");
    ts.count = *v;
  }
  if (auto n = t.get("nonfinite")) {
    auto v = n->value<std::string>();
    if (!v || *v != "as_baseline")
      r.error_at(*n, where + ".nonfinite",
                 "must be \"as_baseline\" (NaN and infinities allowed where the expected output has the same)");
    ts.nonfinite_as_baseline = true;
  }
  if (auto c = t.get("compare")) {
    auto v = c->value<std::string>();
    if (!v || (*v != "exact" && *v != "tolerance"))
      r.error_at(*c, where + ".compare",
                 "must be \"exact\" (equal values; the default for integer and bool outputs) or \"tolerance\"");
    ts.compare = *v == "exact" ? CompareMode::exact : CompareMode::tolerance;
  }
  if (auto tol = t.get("tolerance")) {
    ts.tolerance = parse_tolerance_table(r, *tol, where + ".tolerance");
    if (ts.compare == CompareMode::exact)
      r.error_at(*tol, where + ".tolerance", "this output has compare = \"exact\", which takes no tolerance");
  }
}

TensorSpec parse_tensor(const Reader& r, const toml::table& t, const std::string& where, bool is_input) {
  TensorSpec ts;
  if (is_input) r.only_keys(t, where, {"name", "dtype", "shape", "shape_if", "init", "shared", "mutable", "heldout", "doc"});
  else parse_output_compare(r, t, where, ts);
  ts.name = r.str(t, where, "name", true);
  ts.dtype = r.str(t, where, "dtype", false, "D");
  if (ts.dtype != "D" && !parse_dtype(ts.dtype)) r.error(where + ".dtype", "unknown dtype '" + ts.dtype + "'");
  auto shape = t.get("shape");
  if (!shape) r.error(where + ".shape", "missing");
  ts.shape = r.shape(*shape, where + ".shape");
  if (auto cases = t.get("shape_if")) {
    auto arr = cases->as_array();
    if (!arr) r.error(where + ".shape_if", "must be an array of { when = \"...\", shape = [...] }");
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string w = where + ".shape_if[" + std::to_string(i) + "]";
      auto ct = arr->get(i)->as_table();
      if (!ct) r.error(w, "must be a table { when = \"...\", shape = [...] }");
      r.only_keys(*ct, w, {"when", "shape"});
      auto when = ct->get("when");
      auto cshape = ct->get("shape");
      if (!when || !cshape) r.error(w, "needs both `when` and `shape`");
      ts.shape_if.push_back({r.expr(*when, w + ".when"), r.shape(*cshape, w + ".shape")});
    }
  }
  if (is_input) {
    ts.init = parse_dist(r, t.get("init"), where + ".init");
    auto flag = [&](std::string_view key) {
      auto n = t.get(key);
      if (!n) return false;
      if (!n->is_boolean()) r.error(where + "." + std::string(key), "must be true or false");
      return *n->value<bool>();
    };
    ts.shared = flag("shared");
    ts.mutable_ = flag("mutable");
    if (ts.shared && !ts.init.shared_by.empty())
      r.error(where + ".init.shared_by",
              "input '" + ts.name + "' says both `shared = true` (every rank alike) and `shared_by`; keep one");
    if (auto n = t.get("heldout")) {
      auto v = n->value<std::string>();
      if (!v || *v != "keep")
        r.error(where + ".heldout", "must be \"keep\" (held-out calls then draw this input from its own distribution)");
      ts.heldout_keep = true;
    }
  }
  ts.doc = r.str(t, where, "doc", false);
  return ts;
}

std::vector<TensorSpec> parse_tensors(const Reader& r, const toml::table& root, std::string_view key, bool is_input) {
  std::vector<TensorSpec> out;
  auto n = root.get(key);
  if (!n) r.error(std::string(key), "missing (at least one [[" + std::string(key) + "]] table)");
  auto arr = n->as_array();
  if (!arr || arr->empty()) r.error(std::string(key), "must be a non-empty array of tables [[" + std::string(key) + "]]");
  std::set<std::string> names;
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    auto t = arr->get(i)->as_table();
    if (!t) r.error(where, "must be a table");
    out.push_back(parse_tensor(r, *t, where, is_input));
    if (!names.insert(out.back().name).second) r.error(where + ".name", "duplicate name '" + out.back().name + "'");
  }
  return out;
}

/// Every expression may read only known variables: W, rank, e, size variables, params, group sizes.
void check_variables(const Reader& r, const Spec& s) {
  std::set<std::string> known{"W", "rank", "e"};
  for (auto& sz : s.sizes)
    for (auto& [k, v] : sz.values) known.insert(k);
  for (auto& [k, v] : s.params) known.insert(k);
  for (auto& [k, v] : s.float_params) known.insert(k);
  auto check = [&](const Expr& e, const std::string& where) {
    if (e.empty()) return;
    for (auto& v : e.variables()) {
      for (auto& tp : s.trial_params)
        if (tp.name == v)
          r.error(where, "`" + e.text() + "` reads '" + v +
                             "', a per-call parameter: only the solution (ctx->param) "
                             "and the oracle (io.param) see its value");
      if (!known.count(v)) r.error(where, "unknown variable '" + v + "' in `" + e.text() + "`");
    }
  };
  for (auto& [k, e] : s.params) check(e, "params." + k);
  for (auto& tp : s.trial_params) {
    check(tp.low, "params." + tp.name + ".trial_low");
    check(tp.high, "params." + tp.name + ".trial_high");
  }
  for (size_t i = 0; i < s.constraints.size(); ++i) check(s.constraints[i].expr, "constraints[" + std::to_string(i) + "]");
  auto tensors = [&](const std::vector<TensorSpec>& ts, const std::string& key) {
    for (size_t i = 0; i < ts.size(); ++i) {
      std::string w = key + "[" + std::to_string(i) + "]";
      for (auto& d : ts[i].shape) check(d, w + ".shape");
      for (auto& c : ts[i].shape_if) {
        check(c.when, w + ".shape_if");
        for (auto& d : c.shape) check(d, w + ".shape_if");
      }
      for (auto* e : {&ts[i].init.a, &ts[i].init.b, &ts[i].init.lo, &ts[i].init.hi}) check(*e, w + ".init");
      check(ts[i].init.shared_by, w + ".init.shared_by");
    }
  };
  tensors(s.inputs, "inputs");
  tensors(s.outputs, "outputs");
  for (size_t i = 0; i < s.groups.size(); ++i) {
    check(s.groups[i].color, "groups[" + std::to_string(i) + "].color");
    check(s.groups[i].key, "groups[" + std::to_string(i) + "].key");
  }
  if (s.roofline)
    for (auto* e : {&s.roofline->link_bytes, &s.roofline->flops, &s.roofline->hbm_bytes, &s.roofline->algbw_bytes,
                    &s.roofline->busbw_factor})
      check(*e, "roofline");
}

/// What `shared_by` of input `t` gives at `v`: a whole number >= 0, else an error naming the input
/// and the key (`where`).
long long shared_by_value(const TensorSpec& t, const Vars& v, const std::function<void(const std::string&)>& error) {
  double x = t.init.shared_by.eval(v);
  if (x != std::floor(x) || x < 0 || x > 1e15) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", x);
    error("input '" + t.name + "': `" + t.init.shared_by.text() + "` is " + buf + " at rank " +
          std::to_string(std::llround(v.at("rank"))) + ", W = " + std::to_string(std::llround(v.at("W"))) +
          "; it must be a whole number >= 0 (use // for integer division)");
  }
  return static_cast<long long>(x);
}

/// A `shared_by` that reads only rank and W is evaluated here for every W the problem allows, so that
/// a mistake such as `rank / 2` is an error when the spec loads (others are checked when it resolves).
void check_shared_by(const Reader& r, const Spec& s) {
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const TensorSpec& t = s.inputs[i];
    if (t.init.shared_by.empty()) continue;
    bool plain = true;
    for (auto& v : t.init.shared_by.variables()) plain &= v == "rank" || v == "W";
    if (!plain) continue;
    std::string where = "inputs[" + std::to_string(i) + "].init.shared_by";
    for (int w = s.min_world; w <= s.max_world; ++w)
      for (int rank = 0; rank < w; ++rank) {
        Vars v{{"W", static_cast<double>(w)}, {"rank", static_cast<double>(rank)}};
        try {
          shared_by_value(t, v, [&](const std::string& why) { r.error(where, why); });
        } catch (const Error& e) {
          if (e.code() == Errc::parse_error) throw;
          r.error(where, "input '" + t.name + "': " + e.what());
        }
      }
  }
}

/// A `distinct` view (`of = "x"`) must name another input drawn as `distinct` that is not itself a view.
void check_views(const Reader& r, const Spec& s) {
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const TensorSpec& t = s.inputs[i];
    if (t.init.of.empty()) continue;
    std::string where = "inputs[" + std::to_string(i) + "].init.of";
    auto src = std::find_if(s.inputs.begin(), s.inputs.end(), [&](const TensorSpec& x) { return x.name == t.init.of; });
    if (src == s.inputs.end()) r.error(where, "input '" + t.name + "': no input named '" + t.init.of + "'");
    if (&*src == &t) r.error(where, "input '" + t.name + "' cannot view itself");
    if (src->init.kind != DistKind::distinct || !src->init.of.empty())
      r.error(where, "input '" + t.name + "': '" + t.init.of + "' must be drawn with dist = \"distinct\" and n, k (not a view)");
    if (t.shared)
      r.error("inputs[" + std::to_string(i) + "].shared",
              "input '" + t.name + "': a view shares the draw of '" + t.init.of + "'");
  }
}

/// `count = "<output>"` names another output of an integer dtype (int32 or int64, fixed in the
/// spec), which is no ragged output itself and is compared exactly.
void check_counts(const Reader& r, const Spec& s) {
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const TensorSpec& t = s.outputs[o];
    if (t.count.empty()) continue;
    std::string where = "outputs[" + std::to_string(o) + "].count";
    auto c = std::find_if(s.outputs.begin(), s.outputs.end(), [&](const TensorSpec& x) { return x.name == t.count; });
    if (c == s.outputs.end()) r.error(where, "output '" + t.name + "': no output named '" + t.count + "'");
    if (&*c == &t) r.error(where, "output '" + t.name + "' cannot hold its own count");
    auto cd = parse_dtype(c->dtype);
    if (!cd || (*cd != DType::i32 && *cd != DType::i64))
      r.error(where, "output '" + t.name + "': its count '" + t.count + "' must have dtype \"int32\" or \"int64\" (it has \"" +
                         c->dtype + "\")");
    if (!c->count.empty()) r.error(where, "output '" + t.name + "': its count '" + t.count + "' is a ragged output itself");
    if (c->compare == CompareMode::tolerance || !c->tolerance.empty())
      r.error(where, "output '" + t.name + "': its count '" + t.count + "' must be compared exactly (it has a tolerance)");
  }
}

void parse_sizes(const Reader& r, const toml::table& root, Spec& s) {
  auto n = root.get("sizes");
  auto arr = n ? n->as_array() : nullptr;
  if (!arr || arr->empty()) r.error("sizes", "missing: at least one [[sizes]] table with a name and M, N, ...");
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string where = "sizes[" + std::to_string(i) + "]";
    auto t = arr->get(i)->as_table();
    if (!t) r.error(where, "must be a table");
    SizeClass sc;
    for (auto&& [k, v] : *t) {
      std::string key(k.str());
      if (key == "name") sc.name = r.str(*t, where, "name", true);
      else if (key == "doc") sc.doc = r.str(*t, where, "doc", false);
      else if (v.is_integer()) sc.values.emplace_back(key, *v.value<int64_t>());
      else r.error(where + "." + key, "size variables must be integers");
    }
    if (sc.name.empty()) r.error(where + ".name", "missing");
    if (s.find_size(sc.name)) r.error(where + ".name", "duplicate size class '" + sc.name + "'");
    s.sizes.push_back(std::move(sc));
  }
  // All classes define the same variables, so that any class resolves every expression.
  for (auto& sc : s.sizes) {
    if (sc.values.size() != s.sizes[0].values.size())
      r.error("sizes", "size class '" + sc.name + "' defines different variables than '" + s.sizes[0].name + "'");
    for (auto& [k, v] : sc.values) {
      bool found = false;
      for (auto& [k0, v0] : s.sizes[0].values) found |= k0 == k;
      if (!found) r.error("sizes", "size class '" + sc.name + "' defines '" + k + "', which '" + s.sizes[0].name + "' lacks");
    }
  }
  s.default_size = r.str(root, "", "default_size", false, s.sizes.size() > 1 ? "" : s.sizes[0].name);
  if (s.default_size.empty()) r.error("default_size", "missing (required when there are several [[sizes]])");
  if (!s.find_size(s.default_size)) r.error("default_size", "no size class named '" + s.default_size + "'");
}

/// [tolerance]: a per-dtype table's missing key comes from the top level, then from the default
/// 1e-2 (the top level is read first, so that [tolerance.fp32] atol = 1e-5 keeps the top-level rtol).
void parse_tolerance(const Reader& r, const toml::table& root, Spec& s) {
  auto n = root.get("tolerance");
  if (!n) return;
  ToleranceSpec ts = parse_tolerance_table(r, *n, "tolerance");
  s.tolerance = {ts.all.atol.value_or(1e-2), ts.all.rtol.value_or(1e-2)};
  for (auto& [d, p] : ts.by_dtype)
    s.tolerance_by_dtype.emplace_back(d, Tolerance{p.atol.value_or(s.tolerance.atol), p.rtol.value_or(s.tolerance.rtol)});
}

/// [heldout] rtol = x: the norm-wise bound of held-out calls, for problems whose outputs amplify
/// rounding more than default_heldout_rtol allows (its derivation belongs in a comment); a floor
/// under the dtype's default, so a bound meant for fp32 does not tighten bf16's.
void parse_heldout(const Reader& r, const toml::table& root, Spec& s) {
  auto n = root.get("heldout");
  if (!n) return;
  auto t = n->as_table();
  if (!t) r.error("heldout", "must be a table");
  r.only_keys(*t, "heldout", {"rtol"});
  auto v = t->get("rtol");
  if (!v) return;
  auto x = v->value<double>();
  if (!x || !(*x > 0) || !(*x < 1)) r.error("heldout.rtol", "must be a number in (0, 1)");
  s.heldout_rtol = *x;
}

void parse_roofline(const Reader& r, const toml::table& root, Spec& s) {
  auto n = root.get("roofline");
  if (!n) return;
  auto t = n->as_table();
  if (!t) r.error("roofline", "must be a table");
  r.only_keys(*t, "roofline", {"link_bytes", "flops", "hbm_bytes", "algbw_bytes", "busbw_factor"});
  RooflineSpec rf;
  auto get = [&](std::string_view key, double fallback) {
    if (auto v = t->get(key)) return r.expr(*v, "roofline." + std::string(key));
    return Expr::constant(fallback);
  };
  rf.link_bytes = get("link_bytes", 0);
  rf.flops = get("flops", 0);
  rf.hbm_bytes = get("hbm_bytes", 0);
  rf.algbw_bytes = get("algbw_bytes", 0);
  rf.busbw_factor = get("busbw_factor", 1);
  s.roofline = std::move(rf);
}

}  // namespace

const SizeClass* Spec::find_size(std::string_view n) const {
  for (auto& s : sizes)
    if (s.name == n) return &s;
  return nullptr;
}

void Spec::require_world(int world) const {
  if (world < min_world || world > max_world)
    fail(Errc::invalid_argument, stem + " runs on " + std::to_string(min_world) + " to " + std::to_string(max_world) +
                                     " GPUs, not " + std::to_string(world));
}

DType Spec::default_dtype() const {
  if (dtypes.empty() || std::find(dtypes.begin(), dtypes.end(), DType::bf16) != dtypes.end()) return DType::bf16;
  return dtypes.front();
}

void require_dtype_name(const std::string& name) {
  if (!name.empty() && !parse_dtype(name)) fail(Errc::invalid_argument, "unknown dtype '" + name + "' (" + dtype_names() + ")");
}

DType Spec::dtype_or_default(const std::string& name) const {
  require_dtype_name(name);
  return name.empty() ? default_dtype() : *parse_dtype(name);
}

void Spec::require_dtype(DType d) const {
  if (std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end()) return;
  std::string list;
  for (auto x : dtypes) list += (list.empty() ? "" : ", ") + std::string(to_string(x));
  fail(Errc::invalid_argument, stem + " does not support dtype " + std::string(to_string(d)) + " (supported: " + list + ")");
}

void Spec::require_overrides(const SizeChoice& size) const {
  const SizeClass& sc = require_size(size.name.empty() ? default_size : size.name);
  for (auto& [k, x] : size.overrides) {
    if (k == "W") fail(Errc::invalid_argument, "W is the number of ranks: set it with --gpus, not as a size variable");
    bool known = std::any_of(sc.values.begin(), sc.values.end(), [&](auto& kv) { return kv.first == k; });
    if (!known) {
      std::string list;
      for (auto& kv : sc.values) list += (list.empty() ? "" : ", ") + kv.first;
      fail(Errc::invalid_argument, stem + " has no size variable '" + k + "' (its size variables: " + list + ")");
    }
    if (x <= 0) fail(Errc::invalid_argument, k + " must be positive, not " + std::to_string(x));
  }
}

const SizeClass& Spec::require_size(std::string_view n) const {
  if (const SizeClass* sc = find_size(n)) return *sc;
  std::string list;
  for (auto& s : sizes) list += (list.empty() ? "" : ", ") + s.name;
  fail(Errc::invalid_argument, stem + " has no size class '" + std::string(n) + "' (sizes: " + list + ")");
}

Tolerance Spec::tolerance_for(DType d) const {
  for (auto& [k, t] : tolerance_by_dtype)
    if (k == d) return t;
  return tolerance;
}

Comparison Spec::comparison_for(size_t o, DType out, DType d) const {
  const TensorSpec& t = outputs.at(o);
  CompareMode mode = t.compare.value_or(is_floating(out) || !t.tolerance.empty() ? CompareMode::tolerance : CompareMode::exact);
  Comparison c{CompareMode::exact, {0, 0}};
  c.nonfinite_as_expected = t.nonfinite_as_baseline;
  if (mode == CompareMode::exact) return c;
  Tolerance base = is_floating(out) ? tolerance_for(d) : Tolerance{0, 0};
  ToleranceSpec::Pair p = t.tolerance.all;
  for (auto& [k, v] : t.tolerance.by_dtype)
    if (k == d) {
      if (v.atol) p.atol = v.atol;
      if (v.rtol) p.rtol = v.rtol;
    }
  c.mode = CompareMode::tolerance;
  c.tol = {p.atol.value_or(base.atol), p.rtol.value_or(base.rtol)};
  // A spec's [heldout] rtol widens the dtype's bound, never narrows it: one value serves every D.
  c.heldout_rtol = std::max(heldout_rtol.value_or(0.0), std::max(default_heldout_rtol(d), default_heldout_rtol(out)));
  return c;
}

double default_heldout_rtol(DType d) {
  switch (d) {
    case DType::bf16: return 0x1p-7;
    case DType::fp16: return 0x1p-10;
    case DType::fp32: return 0x1p-15;
    case DType::fp64: return 0x1p-36;
    default: return 0.0;
  }
}

std::string comparison_text(const Comparison& c) {
  std::string nf = c.nonfinite_as_expected ? "; NaN/Inf where the baseline's are" : "";
  if (c.exact()) return "exact" + nf;
  char buf[96];
  std::snprintf(buf, sizeof buf, "atol %g, rtol %g", c.tol.atol, c.tol.rtol);
  return buf + nf;
}

void override_tolerance(Instance& inst, std::optional<double> atol, std::optional<double> rtol) {
  auto apply = [&](Tolerance& t) {
    if (atol) t.atol = *atol;
    if (rtol) t.rtol = *rtol;
  };
  apply(inst.tolerance);
  for (auto& rp : inst.ranks)
    for (auto& tp : rp.outputs)
      if (!tp.compare.exact() && is_floating(tp.dtype)) apply(tp.compare.tol);
}

Spec load_spec(const std::filesystem::path& dir) {
  Spec s;
  s.dir = dir;
  s.stem = dir.filename().string();
  std::filesystem::path file = dir / "spec.toml";
  Reader r(file);
  std::string text = read_file(file);
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    fail(Errc::parse_error, file.string() + ":" + std::to_string(e.source().begin.line) + ":" +
                                std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  r.only_keys(root, "",
              {"id", "name", "origin", "parallelism", "pattern", "summary", "tier", "dtypes", "world", "params", "sizes",
               "default_size", "constraints", "inputs", "outputs", "groups", "tolerance", "heldout", "roofline"});
  s.id = static_cast<int>(r.integer(root, "", "id", true));
  s.name = r.str(root, "", "name", true);
  if (s.stem != std::to_string(s.id) + "_" + s.name)
    r.error("id/name",
            "the folder must be named <id>_<name> = '" + std::to_string(s.id) + "_" + s.name + "', not '" + s.stem + "'");
  s.origin = r.str(root, "", "origin", false);
  s.parallelism = r.str(root, "", "parallelism", false);
  s.pattern = r.str(root, "", "pattern", true);
  s.summary = r.str(root, "", "summary", true);
  s.tier = static_cast<int>(r.integer(root, "", "tier", false, 1));

  if (auto n = root.get("dtypes")) {
    auto arr = n->as_array();
    if (!arr || arr->empty()) r.error("dtypes", "must be a non-empty array such as [\"bf16\", \"fp32\"]");
    for (size_t i = 0; i < arr->size(); ++i) {
      auto v = arr->get(i)->value<std::string>();
      auto d = v ? parse_dtype(*v) : std::nullopt;
      if (!d) r.error("dtypes[" + std::to_string(i) + "]", "unknown dtype");
      s.dtypes.push_back(*d);
    }
  } else {
    s.dtypes = {DType::bf16, DType::fp16, DType::fp32};
  }

  if (auto n = root.get("world")) {
    auto t = n->as_table();
    if (!t) r.error("world", "must be a table { min = 2, max = 8 }");
    r.only_keys(*t, "world", {"min", "max"});
    s.min_world = static_cast<int>(r.integer(*t, "world", "min", false, 2));
    s.max_world = static_cast<int>(r.integer(*t, "world", "max", false, 8));
    if (s.min_world < 1 || s.max_world < s.min_world) r.error("world", "need 1 <= min <= max");
  }

  if (auto n = root.get("params")) {
    auto t = n->as_table();
    if (!t) r.error("params", "must be a table of name = value or expression");
    for (auto&& [k, v] : *t) {
      std::string key(k.str()), where = "params." + key;
      if (v.is_floating_point()) {  // `lr = 1e-3`: a real parameter (ctx->fparam)
        double x = *v.value<double>();
        if (!std::isfinite(x)) r.error_at(v, where, "must be a finite number");
        s.float_params.emplace_back(key, x);
      } else if (auto pt = v.as_table()) {  // `step = { trial_low = 1, trial_high = 7 }`: drawn per call
        r.only_keys(*pt, where, {"trial_low", "trial_high"});
        auto lo = pt->get("trial_low"), hi = pt->get("trial_high");
        if (!lo || !hi)
          r.error_at(v, where, "a per-call parameter needs both trial_low and trial_high (an integer in [low, high] per call)");
        s.trial_params.push_back({key, r.expr(*lo, where + ".trial_low"), r.expr(*hi, where + ".trial_high")});
      } else {
        s.params.emplace_back(key, r.expr(v, where));
      }
    }
  }

  parse_sizes(r, root, s);

  if (auto n = root.get("constraints")) {
    auto arr = n->as_array();
    if (!arr) r.error("constraints", "must be an array of { expr = \"...\", message = \"...\" }");
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string where = "constraints[" + std::to_string(i) + "]";
      auto t = arr->get(i)->as_table();
      if (!t) r.error(where, "must be a table { expr = \"...\", message = \"...\" }");
      r.only_keys(*t, where, {"expr", "message"});
      auto e = t->get("expr");
      if (!e) r.error(where + ".expr", "missing");
      s.constraints.push_back({r.expr(*e, where + ".expr"), r.str(*t, where, "message", false)});
    }
  }

  s.inputs = parse_tensors(r, root, "inputs", true);
  s.outputs = parse_tensors(r, root, "outputs", false);

  if (auto n = root.get("groups")) {
    auto arr = n->as_array();
    if (!arr) r.error("groups", "must be an array of tables [[groups]]");
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string where = "groups[" + std::to_string(i) + "]";
      auto t = arr->get(i)->as_table();
      if (!t) r.error(where, "must be a table");
      r.only_keys(*t, where, {"name", "color", "key"});
      GroupSpec g;
      g.name = r.str(*t, where, "name", true);
      auto c = t->get("color");
      if (!c) r.error(where + ".color", "missing");
      g.color = r.expr(*c, where + ".color");
      g.key = t->get("key") ? r.expr(*t->get("key"), where + ".key") : Expr::parse("rank");
      s.groups.push_back(std::move(g));
    }
  }

  parse_tolerance(r, root, s);
  parse_heldout(r, root, s);
  parse_roofline(r, root, s);
  check_variables(r, s);
  check_shared_by(r, s);
  check_views(r, s);
  check_counts(r, s);

  Sha256 h;
  h.update(text);
  for (auto name : {"reference.cu", "oracle.cpp"}) {
    std::error_code ec;
    if (std::filesystem::exists(dir / name, ec)) h.update(name).update(read_file(dir / name));
  }
  s.hash = h.hex();
  return s;
}

size_t TensorPlan::numel() const {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return n;
}

size_t TensorPlan::row_elems() const { return pkb::row_elems(shape); }

Vars rank_vars(const Instance& inst, int rank) {
  Vars v = inst.vars;
  v["rank"] = rank;
  return v;
}

Vars call_vars(const Instance& inst, uint64_t call_seed, uint64_t stream) {
  Vars v = inst.vars;
  for (size_t k = 0; k < inst.trial_params.size(); ++k)
    v[inst.trial_params[k].name] = static_cast<double>(trial_param_value(call_seed, stream, k, inst.trial_params[k]));
  return v;
}

std::vector<std::pair<std::string, long long>> Instance::int_params() const {
  std::vector<std::pair<std::string, long long>> out;
  for (auto& [k, x] : vars) {
    bool real = k == "e";
    for (auto& [f, fx] : float_params) real |= f == k;
    if (!real) out.emplace_back(k, static_cast<long long>(x));
  }
  return out;
}

namespace {

std::string describe_vars(const Vars& v) {
  std::string out;
  for (auto& [k, x] : v) {
    if (k == "e" || k == "rank") continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s=%g", out.empty() ? "" : ", ", k.c_str(), x);
    out += buf;
  }
  return out;
}

long long spec_world(const Vars& v) { return std::llround(v.at("W")); }

Dist resolve_dist(const DistSpec& d, const Vars& v) {
  Dist out;
  out.kind = d.kind;
  out.a = d.a.eval(v);
  out.b = d.b.eval(v);
  out.lo = d.lo.eval_int(v);
  out.hi = d.hi.eval_int(v);
  return out;
}

/// The shape a `distinct` view needs, given n, k and (when `rows` > 0) the rows of its draw; sets
/// the rows from the shape otherwise. Errors name the input and the layout it needs.
void check_distinct_shape(const Spec& spec, const std::string& name, TensorPlan& p, long long rows) {
  const long long n = p.dist.lo, k = p.dist.hi;
  auto bad = [&](const std::string& want) {
    fail(Errc::invalid_argument, spec.stem + ": input '" + name + "' (distinct, n = " + std::to_string(n) +
                                     ", k = " + std::to_string(k) + ") must have shape " + want);
  };
  const auto& s = p.shape;
  const long long numel = static_cast<long long>(p.numel());
  switch (static_cast<DistinctView>(static_cast<int32_t>(p.dist.b))) {
    case DistinctView::values:
      if (s.empty() || s.back() != k || (rows > 0 && numel != rows * k))
        bad(rows > 0 ? "[" + std::to_string(rows) + ", k]" : "[..., k]");
      if (is_floating(p.dtype)) bad("[M, k] of an integer dtype (view = \"values\")");
      break;
    case DistinctView::onehot:
      if (s.size() != 3 || s[0] != n || s[1] != k || (rows > 0 && s[2] != rows)) bad("[n, k, M] (view = \"onehot\")");
      break;
    case DistinctView::mask:
      if (s.size() != 2 || s[0] != n || (rows > 0 && s[1] != rows)) bad("[n, M] (view = \"mask\")");
      break;
    case DistinctView::grouped:
      if (numel % k != 0 || (rows > 0 && numel != rows * k)) bad("[k * M] (view = \"grouped\")");
      if (n > kGroupedMaxN) bad("with n <= " + std::to_string(kGroupedMaxN) + " for view = \"grouped\"");
      if (is_floating(p.dtype)) bad("[k * M] of an integer dtype (view = \"grouped\")");
      break;
  }
  if (rows <= 0) {
    auto view = static_cast<DistinctView>(static_cast<int32_t>(p.dist.b));
    rows = view == DistinctView::onehot || view == DistinctView::mask ? s.back() : numel / k;
  }
  p.dist.a = static_cast<double>(rows);
}

/// Sets and checks what the structured draws take from the shape and the world (core/dist.hpp).
void resolve_structured(const Spec& spec, const TensorSpec& t, const Vars& v, TensorPlan& p) {
  auto fail_here = [&](const std::string& key, const std::string& why) {
    fail(Errc::invalid_argument, spec.stem + ": input '" + t.name + "': init." + key + ": " + why);
  };
  const long long numel = static_cast<long long>(p.numel());
  if (p.dist.kind == DistKind::distinct) {
    p.dist.b = static_cast<double>(static_cast<int32_t>(t.init.view));
    if (!t.init.of.empty()) return;  // n, k, rows and key come from the source (link_views)
    if (p.dist.hi < 1 || p.dist.hi > kDistinctMaxK) fail_here("k", "must be in [1, " + std::to_string(kDistinctMaxK) + "]");
    if (p.dist.lo < p.dist.hi || p.dist.lo >= (1ll << 31)) fail_here("n", "must be at least k and below 2^31");
    check_distinct_shape(spec, t.name, p, 0);
    return;
  }
  if (p.dist.kind == DistKind::offsets || p.dist.kind == DistKind::permutation) {  // keyed as any input
    const bool offsets = p.dist.kind == DistKind::offsets;
    if (is_floating(p.dtype)) fail_here("dist", std::string(offsets ? "offsets" : "a permutation") + " is integer; use int64");
    if (offsets) {
      p.dist.a = static_cast<double>(numel);
      if (numel < 1) fail_here("dist", "offsets need at least one element (rows + 1)");
      if (p.dist.lo < 0 || p.dist.lo > (1ll << 40) || static_cast<double>(numel) * static_cast<double>(p.dist.lo) > 0x1p62)
        fail_here("mean", "must be in [0, 2^40], with (numel - 1) * mean below 2^62");
    } else if (p.dist.lo < 1 || p.dist.lo > (1ll << 53) || numel > p.dist.lo) {
      fail_here("n", "must be in [1, 2^53] and at least the element count " + std::to_string(numel) + " (values are distinct)");
    }
    return;
  }
  if (is_floating(p.dtype) && p.dist.kind == DistKind::owner_ids) fail_here("dist", "owner_ids are integers; use int64");
  p.dist.shared = true;  // one draw across the ranks; the rank enters through b
  if (p.dist.kind == DistKind::owner_ids) {
    p.dist.lo = numel;
    p.dist.slot = kSplitSlotBase + t.init.matrix;
    if (p.dist.a < static_cast<double>(spec_world(v)) || p.dist.a > 0x1p53 || p.dist.a != std::floor(p.dist.a))
      fail_here("high", "must be a whole number in [W, 2^53] (every owner needs an id)");
  } else {
    p.dist.a = static_cast<double>(numel);
    if (p.dist.lo < 0 || p.dist.lo > (1ll << 40)) fail_here("mean", "must be in [0, 2^40]");
  }
}

/// Gives every `distinct` view (init.of) its source's n, k, rows and key, and checks its shape.
void link_views(const Spec& spec, RankPlan& rp) {
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::string& of = spec.inputs[i].init.of;
    if (of.empty()) continue;
    size_t j = 0;
    while (spec.inputs[j].name != of) ++j;  // exists: check_views
    const Dist& src = rp.inputs[j].dist;
    Dist& d = rp.inputs[i].dist;
    d.lo = src.lo;
    d.hi = src.hi;
    d.shared = src.shared;
    d.share_group = src.share_group;
    d.slot = src.slot >= 0 ? src.slot : static_cast<int64_t>(j);  // the source's key
    check_distinct_shape(spec, spec.inputs[i].name, rp.inputs[i], static_cast<long long>(src.a));
  }
}

/// Gives every ragged output the index of its count (check_counts: it exists), and checks the shapes:
/// the count has one element, the ragged output at least one dimension (its rows).
void link_counts(const Spec& spec, RankPlan& rp) {
  for (size_t o = 0; o < spec.outputs.size(); ++o) {
    const std::string& count = spec.outputs[o].count;
    if (count.empty()) continue;
    int c = 0;
    while (spec.outputs[static_cast<size_t>(c)].name != count) ++c;
    TensorPlan& p = rp.outputs[o];
    p.count_of = c;
    if (rp.outputs[static_cast<size_t>(c)].numel() != 1)
      fail(Errc::invalid_argument, spec.stem + ": output '" + count + "' counts the rows of '" + p.name +
                                       "', so it must have exactly one element (shape [1])");
    if (p.shape.empty())
      fail(Errc::invalid_argument, spec.stem + ": output '" + p.name + "' has a count, so it needs a first dimension (its rows)");
  }
}

TensorPlan resolve_tensor(const Spec& spec, const TensorSpec& t, const Vars& v, DType dtype, bool is_input) {
  TensorPlan p;
  p.name = t.name;
  p.dtype = t.dtype == "D" ? dtype : *parse_dtype(t.dtype);
  const std::vector<Expr>* shape = &t.shape;
  for (auto& c : t.shape_if)
    if (c.when.eval(v) != 0.0) {
      shape = &c.shape;
      break;
    }
  for (auto& d : *shape) {
    long long n;
    try {
      n = d.eval_int(v);
    } catch (const Error& e) {
      fail(Errc::invalid_argument, spec.stem + ": the shape of '" + t.name + "' is not whole at " + describe_vars(v) + " (" +
                                       e.what() + "); choose sizes divisible by W");
    }
    if (n < 0) fail(Errc::invalid_argument, spec.stem + ": the shape of '" + t.name + "' is negative (`" + d.text() + "`)");
    p.shape.push_back(n);
  }
  if (is_input) {
    p.dist = resolve_dist(t.init, v);
    p.mutable_ = t.mutable_;
    p.dist.shared = t.shared;
    if (!t.init.shared_by.empty())
      p.dist.share_group = shared_by_value(
          t, v, [&](const std::string& why) { fail(Errc::invalid_argument, spec.stem + ": inputs.init.shared_by: " + why); });
    p.dist.heldout = !t.heldout_keep && p.dist.kind == DistKind::grid && is_floating(p.dtype);
    if (p.dist.kind == DistKind::split) {
      p.dist.shared = true;  // every rank must see the same matrix
      p.dist.slot = kSplitSlotBase + t.init.matrix;
      if (is_floating(p.dtype))
        fail(Errc::invalid_argument, spec.stem + ": input '" + t.name + "' has a split distribution but is " +
                                         std::string(to_string(p.dtype)) + "; use int64");
      if (p.numel() != static_cast<size_t>(spec_world(v)))
        fail(Errc::invalid_argument, spec.stem + ": input '" + t.name + "' has a split distribution, so its shape must be [W]");
      if (p.dist.lo < 0) fail(Errc::invalid_argument, spec.stem + ": input '" + t.name + "': split total is negative");
    }
    if (structured(p.dist)) resolve_structured(spec, t, v, p);
    if (!is_floating(p.dtype) && (p.dist.kind == DistKind::normal || p.dist.kind == DistKind::uniform))
      fail(Errc::invalid_argument, spec.stem + ": input '" + t.name + "' is " + std::string(to_string(p.dtype)) +
                                       " but its distribution is continuous; use randint");
  }
  return p;
}

}  // namespace

Instance resolve(const Spec& spec, int world, const SizeChoice& size, DType dtype) {
  Instance inst;
  inst.spec = &spec;
  inst.world = world;
  inst.dtype = dtype;
  spec.require_world(world);
  spec.require_dtype(dtype);
  inst.size_name = size.name.empty() ? spec.default_size : size.name;
  const SizeClass* sc = &spec.require_size(inst.size_name);
  Vars& v = inst.vars;
  v["W"] = world;
  v["e"] = static_cast<double>(dtype_size(dtype));
  for (auto& [k, x] : sc->values) v[k] = static_cast<double>(x);
  spec.require_overrides(size);
  for (auto& [k, x] : size.overrides) v[k] = static_cast<double>(x);
  if (!size.overrides.empty()) inst.size_name += "(custom)";
  // Derived parameters may refer to each other in any order: evaluate until nothing changes.
  for (auto& [k, x] : spec.float_params) {
    v[k] = x;
    inst.float_params.emplace_back(k, x);
  }
  std::vector<std::pair<std::string, Expr>> pending = spec.params;
  while (!pending.empty()) {
    size_t before = pending.size();
    for (auto it = pending.begin(); it != pending.end();) {
      bool ready = true;
      for (auto& var : it->second.variables()) ready &= v.count(var) > 0;
      if (ready) {
        v[it->first] = static_cast<double>(it->second.eval_int(v));
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    if (pending.size() == before)
      fail(Errc::invalid_argument, spec.stem + ": parameter '" + pending.front().first + "' depends on itself or on rank");
  }
  for (auto& tp : spec.trial_params) {
    TrialParam p{tp.name, tp.low.eval_int(v), tp.high.eval_int(v)};
    if (p.low > p.high)
      fail(Errc::invalid_argument, spec.stem + ": per-call parameter '" + p.name + "' has trial_low " + std::to_string(p.low) +
                                       " > trial_high " + std::to_string(p.high));
    inst.trial_params.push_back(p);
  }
  for (auto& c : spec.constraints)
    if (c.expr.eval(v) == 0.0)
      fail(Errc::invalid_argument,
           spec.stem + " at " + describe_vars(v) + ": " +
               (c.message.empty() ? "`" + c.expr.text() + "` does not hold" : c.message + " (`" + c.expr.text() + "`)"));
  inst.tolerance = spec.tolerance_for(dtype);
  for (int r = 0; r < world; ++r) {
    RankPlan rp;
    rp.rank = r;
    Vars rv = rank_vars(inst, r);
    for (auto& t : spec.inputs) {
      rp.inputs.push_back(resolve_tensor(spec, t, rv, dtype, true));
      inst.heldout |= rp.inputs.back().dist.heldout;
    }
    link_views(spec, rp);
    for (size_t o = 0; o < spec.outputs.size(); ++o) {
      rp.outputs.push_back(resolve_tensor(spec, spec.outputs[o], rv, dtype, false));
      rp.outputs.back().compare = spec.comparison_for(o, rp.outputs.back().dtype, dtype);
    }
    link_counts(spec, rp);
    for (auto& g : spec.groups)
      rp.groups.push_back({g.name, static_cast<int>(g.color.eval_int(rv)), static_cast<int>(g.key.eval_int(rv))});
    inst.ranks.push_back(std::move(rp));
  }
  return inst;
}

}  // namespace pkb
