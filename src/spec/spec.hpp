// A problem's declarative spec (problems/<id>_<name>/spec.toml) as typed data, and its
// resolution into concrete per-rank tensors for one (world size, size class, dtype).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "core/dtype.hpp"
#include "core/trial_param.hpp"
#include "spec/expr.hpp"

namespace pkb {

/// A distribution whose parameters are expressions (they may depend on W, sizes, params).
struct DistSpec {
  DistKind kind = DistKind::normal;
  Expr a, b, lo, hi;  // meaning per kind, see core/dist.hpp
  long long matrix = 0;  // split, owner_ids: which split matrix (inputs with the same number share one)
  Expr shared_by;  // empty, or an integer expression of rank: ranks with one value draw alike
  DistinctView view = DistinctView::values;  // distinct: what the tensor holds of its draw
  std::string of;  // distinct: the input whose draw this one views (its n, k, rows and key)
};

struct ShapeCase {
  Expr when;
  std::vector<Expr> shape;
};

struct Tolerance {
  double atol = 1e-2, rtol = 1e-2;
};

/// A tolerance table as written in spec.toml: atol and rtol, each optional, plus per-dtype tables
/// keyed by the benchmark dtype D ([tolerance.fp32], or an output's `tolerance.fp32`).
struct ToleranceSpec {
  struct Pair {
    std::optional<double> atol, rtol;
  };
  Pair all;
  std::vector<std::pair<DType, Pair>> by_dtype;
  bool empty() const { return !all.atol && !all.rtol && by_dtype.empty(); }
};

/// How an output is compared with its expected value.
enum class CompareMode {
  tolerance,  // |got - expected| <= atol + rtol * |expected|
  exact,  // equal values (integers: equal bits); NaN meets NaN, an infinity the same infinity
};

/// An output's comparison, resolved for one benchmark dtype.
struct Comparison {
  CompareMode mode = CompareMode::tolerance;
  Tolerance tol;  // used when mode == tolerance
  /// The bound held-out calls use (heldout_trial in core/dist.hpp): an output must have
  /// ||got - expected||_2 <= heldout_rtol * ||expected||_2, and every element within
  /// tol + 16 * heldout_rtol * rms(expected) (off-grid inputs make sums inexact, so near-cancelling
  /// elements may differ by more than `tol` between correct algorithms).
  double heldout_rtol = 0;
  double norm_rtol = 0;  // the bound in force for this comparison: 0, or heldout_rtol (for_call)
  /// `nonfinite = "as_baseline"`: NaN and infinities are right where the expected value has the same
  /// (a log-prob of -inf for a filtered token); elsewhere, and always without it, they are wrong.
  bool nonfinite_as_expected = false;
  bool exact() const { return mode == CompareMode::exact; }
};

/// The comparison of one call: held-out calls of an instance that redraws inputs get the norm-wise
/// bound, exact outputs stay exact.
inline Comparison for_call(Comparison c, bool heldout) {
  c.norm_rtol = heldout && !c.exact() ? c.heldout_rtol : 0.0;
  return c;
}

/// The default held-out bound for a floating dtype: 2^-7 (bf16), 2^-10 (fp16), 2^-15 (fp32), 2^-36
/// (fp64), about four times the relative error of rounding each element once, which a correct
/// algorithm's reordering stays well under and moving the data in fewer bits does not.
double default_heldout_rtol(DType d);

/// What an output that declares nothing gets: `problem` for floating dtypes, exact for integer and
/// bool outputs (a tolerance such as 1e-2 + 1e-2 * |ref| would let a count of 1000 be off by 10).
inline Comparison default_comparison(DType d, Tolerance problem) {
  return is_floating(d) ? Comparison{CompareMode::tolerance, problem} : Comparison{CompareMode::exact, {0, 0}};
}

/// "exact" or "atol 1e-05, rtol 0.01", for `pkb show` and prompts.
std::string comparison_text(const Comparison& c);

struct TensorSpec {
  std::string name;
  std::string dtype = "D";  // "D" (the benchmark dtype) or a fixed dtype name
  std::vector<Expr> shape;
  std::vector<ShapeCase> shape_if;  // first case whose `when` holds wins, else `shape`
  DistSpec init;  // inputs only
  bool shared = false;  // inputs only: the same values on every rank
  bool mutable_ = false;  // inputs only: the problem modifies it in place (PKB semantics)
  bool heldout_keep = false;  // inputs only: `heldout = "keep"`, held-out calls draw it as usual
  std::optional<CompareMode> compare;  // outputs only: `compare = "exact" | "tolerance"`, else the default
  ToleranceSpec tolerance;  // outputs only: the output's own tolerance table
  bool nonfinite_as_baseline = false;  // outputs only: `nonfinite = "as_baseline"` (Comparison)
  /// Outputs only: `count = "<output>"`, a ragged output. Its first dimension is a capacity; the named
  /// output (int32 or int64, one element, written by the solution) says how many rows of it hold
  /// values. The count is compared exactly, the counted rows by value, and the rows past it not at
  /// all (a solution may leave them unwritten or fill them with anything).
  std::string count;
  std::string doc;
};

struct GroupSpec {
  std::string name;
  Expr color, key;  // ncclCommSplit arguments, evaluated per rank
};

struct SizeClass {
  std::string name;
  std::vector<std::pair<std::string, long long>> values;  // M, N, ...
  std::string doc;
};

struct Constraint {
  Expr expr;
  std::string message;
};

/// Expressions for the performance model; each carries its derivation as a comment in spec.toml.
struct RooflineSpec {
  Expr link_bytes;  // bytes the busiest rank must move over its interconnect, one direction
  Expr flops;  // floating-point operations per rank
  Expr hbm_bytes;  // bytes per rank through HBM at minimum
  Expr algbw_bytes;  // "S" for algbw = S / time (nccl-tests convention)
  Expr busbw_factor;  // busbw = algbw * factor
};

struct SizeChoice;

struct Spec {
  std::filesystem::path dir;
  std::string stem;  // folder name, e.g. "1_allreduce"
  int id = 0;
  std::string name, origin, parallelism, pattern, summary;
  int tier = 1;
  std::vector<DType> dtypes;
  int min_world = 2, max_world = 8;
  std::vector<std::pair<std::string, Expr>> params;  // derived integer parameters (root, K, ...)
  std::vector<std::pair<std::string, double>> float_params;  // `lr = 1e-3`: a TOML float is a real parameter
  /// `step = { trial_low = 1, trial_high = 7 }`: an integer drawn per call (core/trial_param.hpp).
  struct TrialParamSpec {
    std::string name;
    Expr low, high;
  };
  std::vector<TrialParamSpec> trial_params;
  std::vector<SizeClass> sizes;
  std::string default_size;
  std::vector<Constraint> constraints;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<GroupSpec> groups;
  Tolerance tolerance;
  std::vector<std::pair<DType, Tolerance>> tolerance_by_dtype;
  std::optional<RooflineSpec> roofline;
  std::optional<double> heldout_rtol;  // [heldout] rtol: replaces default_heldout_rtol for every output
  std::string hash;  // sha256 over spec.toml, reference.cu and oracle.cpp

  const SizeClass* find_size(std::string_view name) const;
  /// find_size, or Error(invalid_argument) naming the size classes there are.
  const SizeClass& require_size(std::string_view name) const;
  /// Error(invalid_argument) with the allowed range / list unless `world` / `d` is supported.
  void require_world(int world) const;
  void require_dtype(DType d) const;
  /// The dtype used when none is named: bf16 where the spec lists it, else its first.
  DType default_dtype() const;
  /// `name` parsed (an unknown name is an error listing the names: require_dtype_name), or
  /// default_dtype() when empty.
  DType dtype_or_default(const std::string& name) const;
  /// Error(invalid_argument) unless every override names a variable of the chosen size class (W is
  /// the world, set by --gpus) with a positive value. resolve() checks this too; a caller checks it
  /// early to refuse bad input before looking for GPUs.
  void require_overrides(const SizeChoice& size) const;
  /// The problem-level tolerance for benchmark dtype `d`: [tolerance.<d>], each key falling back to
  /// [tolerance], then to 1e-2.
  Tolerance tolerance_for(DType d) const;
  /// How output `o` (of dtype `out`) is compared when the benchmark dtype is `d`. A tolerance key
  /// comes from the first of: the output's `tolerance.<d>`, the output's `tolerance`, then, for a
  /// floating output, tolerance_for(d); for an integer or bool output, 0.
  Comparison comparison_for(size_t o, DType out, DType d) const;
  std::filesystem::path reference_path() const { return dir / "reference.cu"; }
};

/// Parses and validates dir/spec.toml. Errors name the file, the key and the reason.
Spec load_spec(const std::filesystem::path& dir);

/// Which size: a named class, optionally with M/N (or any size variable) overridden.
struct SizeChoice {
  std::string name;  // empty: the spec's default
  std::vector<std::pair<std::string, long long>> overrides;
};

struct TensorPlan {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<long long> shape;
  Dist dist;  // inputs only
  bool mutable_ = false;  // inputs only: may be modified by a call (regenerated before every call)
  Comparison compare;  // outputs only: how it is compared (Spec::comparison_for)
  int count_of = -1;  // outputs only: a ragged output's count (an index into the rank's outputs), or -1
  size_t numel() const;
  /// Elements per row of the first dimension (a ragged output's rows are counted in these).
  size_t row_elems() const;
  size_t bytes() const { return numel() * dtype_size(dtype); }
};

/// Whether two ranks' plans of one tensor can be listed as one: same shape, dtype and draw.
inline bool same_listing(const TensorPlan& a, const TensorPlan& b) {
  return a.shape == b.shape && a.dtype == b.dtype && same_draw(a.dist, b.dist);
}

struct GroupPlan {
  std::string name;
  int color = 0, key = 0;
};

struct RankPlan {
  int rank = 0;
  std::vector<TensorPlan> inputs, outputs;
  std::vector<GroupPlan> groups;
};

/// Error(invalid_argument) listing the dtype names unless `name` is empty (the spec's default) or
/// one of them: for refusing a bad --dtype before any spec is loaded.
void require_dtype_name(const std::string& name);

/// A spec resolved for one world size, size and dtype: everything a worker needs.
struct Instance {
  const Spec* spec = nullptr;
  int world = 0;
  DType dtype = DType::bf16;
  std::string size_name;
  Vars vars;  // W, e, sizes, params (rank-independent)
  std::vector<RankPlan> ranks;
  Tolerance tolerance;  // the problem-level tolerance (outputs carry their own, TensorPlan::compare)
  std::vector<std::pair<std::string, double>> float_params;  // also in vars
  std::vector<TrialParam> trial_params;  // bounds resolved; not in vars (a call's value: trial_vars)
  /// The integer parameters a solution sees in ctx->params: every variable but e and the float
  /// parameters (the worker appends the per-call parameters, with each call's value).
  std::vector<std::pair<std::string, long long>> int_params() const;
  bool heldout = false;  // some input is redrawn in held-out calls (Dist::heldout)
};

/// Resolves `spec`; throws Error(invalid_argument) with a one-line reason when the combination is
/// not allowed (world size out of range, unsupported dtype, a constraint such as M % W == 0).
Instance resolve(const Spec& spec, int world, const SizeChoice& size, DType dtype);

/// The --atol / --rtol override: replaces inst.tolerance's and every floating output's atol / rtol
/// where one is given (outputs compared exactly stay exact).
void override_tolerance(Instance& inst, std::optional<double> atol, std::optional<double> rtol);

/// The variables visible to expressions of rank `rank`.
Vars rank_vars(const Instance& inst, int rank);

/// inst.vars plus every per-call parameter's value for the call whose inputs are keyed by
/// (call_seed, stream): what an oracle of that call sees (trial t: stream_seed(seed, t), stream t).
Vars call_vars(const Instance& inst, uint64_t call_seed, uint64_t stream);

}  // namespace pkb
