// Gathering a prompt's inputs: the problem folder, the ABI header, example files, the resolved
// instance and the machine's measured facts, each formatted as plain text for the templates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/strings.hpp"
#include "prompt/prompt.hpp"
#include "roofline/roofline.hpp"

namespace pkb {

namespace {

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  return fmt::format("{:g}", v);
}

std::string distinct_text(const Dist& d) {
  std::string draw =
      fmt::format("{} rows of {} distinct random integers in [0, {}), ascending in each row", number(d.a), d.hi, d.lo);
  switch (static_cast<DistinctView>(static_cast<int32_t>(d.b))) {
    case DistinctView::values: return draw;
    case DistinctView::onehot: return "1 at [v, j, m] where row m's j-th value is v, else 0, of " + draw;
    case DistinctView::mask: return "1 at [v, m] where row m holds v, else 0, of " + draw;
    case DistinctView::grouped:
      return "the row indices m grouped by value v (v ascending, m ascending within a value) of " + draw;
  }
  return draw;
}

std::string dist_text(const Dist& d) {
  switch (d.kind) {
    case DistKind::normal: return fmt::format("normal, mean {:g}, std {:g}", d.a, d.b);
    case DistKind::uniform: return fmt::format("uniform in [{:g}, {:g})", d.a, d.b);
    case DistKind::grid:
      return fmt::format("k * {:g} for a random integer k in [{}, {}] (sums of such values are exact in any order)", d.a, d.lo,
                         d.hi);
    case DistKind::randint: return fmt::format("random integers in [{}, {}]", d.lo, d.hi);
    case DistKind::zeros: return "zeros";
    case DistKind::ones: return "ones";
    case DistKind::arange: return fmt::format("the element index plus {}", d.lo);
    case DistKind::split:
      return fmt::format(
          "all-to-all split sizes: {} of one random W x W count matrix that every rank shares, in which "
          "every row and every column sums to {} (entries may be 0)",
          d.a == 0.0 ? "row `rank` (rows this rank sends to each rank)"
                     : "column `rank` (rows this rank receives from each rank)",
          d.lo);
    case DistKind::spread:  // a held-out call's redraw of a grid
      return fmt::format("off-grid values: uniform in [{:g}, {:g}) times 2^-s for a random s in 0..7",
                         static_cast<double>(d.lo) * d.a, static_cast<double>(d.hi) * d.a);
    case DistKind::distinct: return distinct_text(d);
    case DistKind::owner_ids:
      return fmt::format(
          "random ids in [0, {}); how many each rank owns (owner = id mod W) follows row `rank` of one "
          "random W x W count matrix that every rank shares, whose rows and columns each sum to {} (so "
          "every rank receives {} ids when ids go to their owners), in random order",
          number(d.a), d.lo, d.lo);
    case DistKind::composition:
      return fmt::format(
          "random integers in [0, {}] (jagged lengths) whose sum over this tensor is {} on every rank, "
          "and whose sum over the ranks at each position is W * {}; how they split into parts varies",
          2 * d.lo, static_cast<long long>(d.a) * d.lo, d.lo);
    case DistKind::offsets:
      return fmt::format(
          "nondecreasing row pointers (CSR / CSC offsets) of {} rows: the first is 0, the last {}, and "
          "each row's length (the difference of neighbours) is a random integer in [0, {}], empty rows "
          "included",
          static_cast<long long>(d.a) - 1, (static_cast<long long>(d.a) - 1) * d.lo, 2 * d.lo);
    case DistKind::permutation:
      return fmt::format(
          "distinct random integers in [0, {}), in random order (a random permutation when there are "
          "{} elements)",
          d.lo, d.lo);
  }
  return "?";
}

/// What held-out calls draw instead of a grid input.
std::string heldout_text(const Dist& d) { return "; in held-out calls, " + dist_text(held_out(d)); }

/// Source text without its final newlines, so that a closing fence follows the last line directly.
std::string source(const fs::path& path) {
  std::string s = read_file(path);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string tensor_text(const TensorPlan& t) {
  std::string dims;
  for (size_t i = 0; i < t.shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(t.shape[i]);
  return fmt::format("{}[{}] ({})", to_string(t.dtype), dims, format_bytes(static_cast<double>(t.bytes())));
}

/// How an output is compared, where that is not the problem's tolerance the prompt states.
std::string compare_note(const Comparison& c, const Tolerance& problem) {
  if (c.nonfinite_as_expected) {
    std::string rest = compare_note(
        [&] {
          Comparison d = c;
          d.nonfinite_as_expected = false;
          return d;
        }(),
        problem);
    return rest + "; NaN and infinities are right exactly where the baseline's output has the same";
  }
  if (c.exact()) return "; compared exactly (every element must equal the baseline's, no tolerance)";
  if (c.tol.atol == problem.atol && c.tol.rtol == problem.rtol) return "";
  return fmt::format("; its own tolerance: |out - ref| <= {:g} + {:g} * |ref|", c.tol.atol, c.tol.rtol);
}

/// One bullet per run of consecutive ranks whose tensor `i` has the same shape and dtype.
std::string tensor_list(const Instance& inst, bool inputs) {
  const auto& ranks = inst.ranks;
  const auto& specs = inputs ? inst.spec->inputs : inst.spec->outputs;
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto get = [&](size_t r) -> const TensorPlan& { return inputs ? ranks[r].inputs[i] : ranks[r].outputs[i]; };
    for (size_t start = 0, r = 1; r <= ranks.size(); ++r) {
      if (r < ranks.size() && same_listing(get(r), get(start))) continue;  // outputs: no draw, always alike
      std::string who = start == r - 1 ? fmt::format("rank {}", start) : fmt::format("ranks {}-{}", start, r - 1);
      out += fmt::format("- [{}] `{}` on {}: {}", i, specs[i].name, who, tensor_text(get(start)));
      if (inputs) {
        out += "; values: " + dist_text(get(start).dist);
        if (get(start).dist.shared && !per_rank_part(get(start).dist)) out += ", identical on every rank";
        if (!specs[i].init.of.empty()) out += " (the same draw as `" + specs[i].init.of + "`, consistent with it)";
        if (!specs[i].init.shared_by.empty())
          out += ", identical on the ranks with the same value of `" + specs[i].init.shared_by.text() + "`";
        if (get(start).dist.heldout) out += heldout_text(get(start).dist);
        if (get(start).mutable_) out += "; the reference modifies it in place (you may too; only outputs are compared)";
      } else {
        out += compare_note(get(start).compare, inst.tolerance);
        if (!specs[i].count.empty())
          out += fmt::format(
              "; ragged: its first dimension ({} rows) is a capacity, and output `{}` must hold how many rows you wrote "
              "(rows 0 to count - 1 are compared; rows past the count may hold anything)",
              get(start).shape[0], specs[i].count);
      }
      if (!specs[i].doc.empty()) out += " — " + specs[i].doc;
      out += "\n";
      start = r;
    }
  }
  return out;
}

/// The held-out rule, where some input has a grid to leave.
std::string heldout_rule(const Instance& inst) {
  if (!inst.heldout) return "";
  double bound = 0;
  for (auto& o : inst.ranks.at(0).outputs) bound = std::max(bound, o.compare.exact() ? 0.0 : o.compare.heldout_rtol);
  return fmt::format(
      "Held-out calls (trials 1, 3, ... and every warm-up and timed call) draw the inputs marked \"in held-out "
      "calls\" off their grid, so sums there are no longer exact: there a floating output must have a relative L2 "
      "error against the baseline's of at most {:g}, and every element within the tolerance plus 16 * {:g} * "
      "rms(ref). A solution must be correct on those values too.",
      bound, bound);
}

std::string rate(double v, const char* unit) { return v > 0 ? fmt::format("{:.0f} {}", v, unit) : "not measured"; }
std::string latency(double us) { return us > 0 ? fmt::format("{:.1f} us", us) : "not measured"; }

}  // namespace

std::string shapes_text(const Instance& inst) {
  std::string vars, reals;
  for (auto& [k, v] : inst.vars) {
    if (k == "e") continue;
    bool real = std::any_of(inst.float_params.begin(), inst.float_params.end(), [&](auto& f) { return f.first == k; });
    (real ? reals : vars) += ((real ? reals : vars).empty() ? "" : ", ") + k + " = " + number(v);
  }
  std::string out = fmt::format("Parameters: {} (ctx->param(ctx, \"M\", 0) reads them).\n", vars);
  if (!reals.empty()) out += fmt::format("Real parameters: {} (ctx->fparam(ctx, \"name\", 0.0) reads them).\n", reals);
  for (auto& tp : inst.trial_params)
    out += fmt::format(
        "Per-call parameter `{}`: an integer in [{}, {}] that changes from call to call (read it with "
        "ctx->param in every pkb_run, never cache it).\n",
        tp.name, tp.low, tp.high);
  out += "\n";
  out += "Inputs of pkb_run, in this order (read-only):\n" + tensor_list(inst, true);
  out += "\nOutputs of pkb_run, in this order (preallocated):\n" + tensor_list(inst, false);
  const auto& groups = inst.spec->groups;
  if (!groups.empty()) {
    out += "\nSub-groups (ctx->find_group(ctx, name); ranks with the same colour form one group):\n";
    for (size_t g = 0; g < groups.size(); ++g) {
      out += "- `" + groups[g].name + "`:";
      for (auto& rp : inst.ranks) out += fmt::format(" rank {} -> colour {};", rp.rank, rp.groups[g].color);
      out.back() = '\n';
    }
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string traffic_text(const Instance& inst) {
  std::optional<Work> w = instance_work(inst);
  if (!w) return "No roofline model is given for this problem.";
  return fmt::format(
      "Minimum work of the busiest rank per call (the problem's roofline model): {} over its NVLink links "
      "(one direction), {} through HBM, {}.",
      format_bytes(w->link_bytes), format_bytes(w->hbm_bytes),
      w->flops > 0 ? number(w->flops) + " floating-point operations" : "no floating-point arithmetic");
}

TemplateVars hardware_vars(const HardwareFacts& h, const Instance& inst) {
  auto text = [](const std::string& s) { return s.empty() ? std::string("not recorded") : s; };
  TemplateVars v{{"gpu_name", text(h.gpu_name)},
                 {"gpu_count", std::to_string(h.gpu_count)},
                 {"driver", text(h.driver)},
                 {"nccl", text(h.nccl)},
                 {"topology", text(h.topology)},
                 {"measured_at", text(h.measured_at)},
                 {"link_store", rate(h.link_store_gbps, "GB/s")},
                 {"link_load", rate(h.link_load_gbps, "GB/s")},
                 {"link_ce", rate(h.link_ce_gbps, "GB/s")},
                 {"ring", rate(h.ring_gbps, "GB/s")},
                 {"all_to_all", rate(h.all_to_all_gbps, "GB/s")},
                 {"hbm", rate(h.hbm_gbps, "GB/s")},
                 {"gemm_bf16", rate(h.gemm_bf16_tflops, "TFLOP/s")},
                 {"gemm_fp32", rate(h.gemm_fp32_tflops, "TFLOP/s")},
                 {"launch", latency(h.launch_us)},
                 {"flag_rtt", latency(h.flag_rtt_us)},
                 {"nccl_allreduce_8k", latency(h.nccl_allreduce_8k_us)},
                 {"floor", ""}};
  std::optional<Work> w = instance_work(inst);
  if (!w) return v;
  // The same floor `pkb eval` reports (roofline/roofline.hpp), from the measured rates only.
  Roofline r = compute_roofline(*w, h, h, inst.dtype, 0, "calibrated");
  if (r.floor_us <= 0) return v;
  std::string parts;
  for (auto [what, us] : {std::pair{"NVLink bytes / link rate", r.link_us},
                          {"FLOPs / GEMM rate", r.flop_us},
                          {"HBM bytes / HBM rate", r.hbm_us},
                          {"one kernel launch", r.launch_us}})
    if (us >= 0.05) parts += fmt::format("{}{} {:.1f} us", parts.empty() ? "" : ", ", what, us);
  v["floor"] = fmt::format(
      "At these rates this configuration cannot run faster than about {:.1f} us per call "
      "({}-bound: {}).",
      r.floor_us, r.bound, parts);
  return v;
}

PromptInputs gather_prompt_inputs(const PromptTemplates& t, const Spec& spec, const PromptRequest& req) {
  auto dtype = parse_dtype(req.dtype);
  if (!dtype) fail(Errc::invalid_argument, "unknown dtype '" + req.dtype + "'");
  std::string dtype_name(to_string(*dtype));  // "bfloat16" -> "bf16": the precision sections' names
  Instance inst = resolve(spec, req.world, {req.size, {}}, *dtype);
  const BackendTemplates& backend = t.backend(req.backend);
  t.precision(dtype_name);  // fail early, before reading files
  PromptInputs in;
  in.backend = req.backend;
  std::string rel_dir = "problems/" + spec.stem;
  in.problem = {{"problem_stem", spec.stem},
                {"problem_name", spec.name},
                {"problem_id", std::to_string(spec.id)},
                {"problem_summary", spec.summary},
                {"problem_pattern", spec.pattern},
                {"problem_parallelism", spec.parallelism},
                {"problem_origin", spec.origin},
                {"baseline_path", rel_dir + "/reference.cu"},
                {"baseline_source", source(spec.reference_path())},
                {"abi_header", source(req.home / "include" / "pkb" / "solution.h")},
                {"world", std::to_string(req.world)},
                {"size_name", inst.size_name},
                {"dtype", dtype_name},
                {"atol", fmt::format("{:g}", inst.tolerance.atol)},
                {"rtol", fmt::format("{:g}", inst.tolerance.rtol)},
                {"heldout", heldout_rule(inst)},
                {"shapes", shapes_text(inst)},
                {"traffic", traffic_text(inst)}};
  std::error_code ec;
  if (fs::exists(spec.dir / "README.md", ec)) in.readme = read_file(spec.dir / "README.md");
  for (const ExampleRef& e : backend.examples) {
    if (e.problem == spec.stem) continue;  // never show a problem its own solution
    fs::path base = spec.dir.parent_path() / e.problem / "reference.cu";
    if (!fs::exists(base, ec)) base = req.home / "problems" / e.problem / "reference.cu";
    in.examples.push_back(
        {e.label, e.problem, "problems/" + e.problem + "/reference.cu", source(base), e.solution, source(req.home / e.solution)});
  }
  if (req.hardware) in.hardware = hardware_vars(*req.hardware, inst);
  return in;
}

}  // namespace pkb
