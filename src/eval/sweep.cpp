#include "eval/sweep.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "core/error.hpp"
#include "core/philox.hpp"
#include "core/strings.hpp"
#include "eval/internal.hpp"
#include "eval/profile_out.hpp"
#include "roofline/roofline.hpp"

namespace pkb {

using namespace detail;

std::vector<uint64_t> sweep_sizes(uint64_t begin, uint64_t end, double factor) {
  if (begin == 0 || end < begin) throw Error(Errc::invalid_argument, "sweep: need 0 < -b <= -e");
  if (factor <= 1.0) throw Error(Errc::invalid_argument, "sweep: the factor -f must be greater than 1");
  std::vector<uint64_t> out;
  for (double s = static_cast<double>(begin); s <= static_cast<double>(end) * (1 + 1e-9); s *= factor)
    out.push_back(static_cast<uint64_t>(std::llround(s)));
  return out;
}

namespace {

/// The instance whose algbw bytes come closest to `target` by scaling `var` (smallest valid value
/// at or above the linear estimate).
std::unique_ptr<Instance> instance_for(const Prepared& p, const SweepOptions& o, uint64_t target) {
  const Instance& base = p.inst;
  auto bytes_at = [&](double v) {
    Vars vars = rank_vars(base, 0);
    vars[o.var] = v;
    return p.spec.roofline->algbw_bytes.eval(vars);
  };
  double f1 = bytes_at(1), slope = bytes_at(2) - f1;
  if (slope <= 0) throw Error(Errc::invalid_argument, "sweep: algbw bytes do not grow with " + o.var);
  long long v = std::max(1ll, static_cast<long long>(std::llround((static_cast<double>(target) - (f1 - slope)) / slope)));
  std::string last_error;
  for (long long tries = 0; tries < 256; ++tries, ++v) {
    SizeChoice sc{o.eval.size.empty() ? p.spec.default_size : o.eval.size, {{o.var, v}}};
    for (auto& [k, x] : o.eval.size_overrides)
      if (k != o.var) sc.overrides.emplace_back(k, x);
    try {
      auto inst = std::make_unique<Instance>(resolve(p.spec, base.world, sc, base.dtype));
      override_tolerance(*inst, o.eval.atol, o.eval.rtol);
      inst->size_name = format_bytes(static_cast<double>(target));
      return inst;
    } catch (const Error& e) {
      last_error = e.what();
    }
  }
  throw Error(Errc::invalid_argument,
              "sweep: no valid instance near " + format_bytes(static_cast<double>(target)) + ": " + last_error);
}

double graph_us(const StepResult& sr) {
  double worst = 0;
  for (auto& rt : sr.graph)
    worst = std::max(worst, rt.body.value("span_ms", 0.0) * 1000.0 / std::max(1, rt.body.value("iters", 1)));
  return worst;
}

/// Checks and timing of one size into its record.
void conclude_size(const Prepared& p, const Instance& inst, const JobResult& base, const JobResult* cand, size_t s,
                   SweepRow& row) {
  EvalRecord& rec = row.record;
  const StepResult& bs = base.steps.at(s);
  check_sanity(inst, bs, rec);
  rec.baseline_timing = summarize_timing(bs, rec, "baseline");
  row.base_graph_us = graph_us(bs);
  if (cand) {
    const StepResult& cs = cand->steps.at(s);
    check_sanity(inst, cs, rec);
    check_trials(inst, bs, cs, rec);
    rec.candidate_timing = summarize_timing(cs, rec, "candidate");
    check_timed_calls(inst, bs, cs, rec);
    compare_overheads(rec, p.placement.oversubscribed());
    row.cand_graph_us = graph_us(cs);
  } else {
    rec.candidate_timing = rec.baseline_timing;
    rec.candidate.label = "baseline";
  }
  attach_roofline(p, inst, rec);
  if (!bs.graph.empty())
    rec.graph_timing = {{"baseline_us", row.base_graph_us}, {"candidate_us", cand ? row.cand_graph_us : row.base_graph_us}};
  conclude_checks(rec);
  if (cand && rec.baseline_timing.us.median > 0 && rec.candidate_timing.us.median > 0)
    rec.speedup = rec.baseline_timing.us.median / rec.candidate_timing.us.median;
}

}  // namespace

namespace {

/// The instances a sweep visits: named size classes, or one per byte size.
std::vector<std::unique_ptr<Instance>> sweep_instances(const Prepared& p, const SweepOptions& o) {
  std::vector<std::unique_ptr<Instance>> out;
  std::vector<std::string> classes = o.classes;
  if (classes.size() == 1 && classes[0] == "all") {
    classes.clear();
    for (auto& sc : p.spec.sizes) classes.push_back(sc.name);
  }
  for (auto& name : classes) {
    auto inst = std::make_unique<Instance>(resolve(p.spec, p.inst.world, {name, o.eval.size_overrides}, p.inst.dtype));
    override_tolerance(*inst, o.eval.atol, o.eval.rtol);
    out.push_back(std::move(inst));
  }
  if (classes.empty())
    for (uint64_t target : sweep_sizes(o.begin_bytes, o.end_bytes, o.factor)) out.push_back(instance_for(p, o, target));
  return out;
}

}  // namespace

std::vector<SweepRow> run_sweep(const SweepOptions& o) {
  auto t0 = Clock::now();
  // A sweep by bytes scales one variable of the size class (not W, not a derived parameter) of a
  // spec that counts its bytes: refused before any GPU is probed.
  Prepared p = prepare(o.eval, o.classes, [&](const Spec& spec) {
    if (!o.classes.empty()) return;
    if (!spec.roofline)
      throw Error(Errc::invalid_argument, spec.stem + " has no [roofline] algbw_bytes: it cannot be swept by bytes");
    spec.require_overrides({o.eval.size, {{o.var, 1}}});
  });
  bool with_candidate = !p.solution_is_reference;
  std::vector<std::unique_ptr<Instance>> insts = sweep_instances(p, o);
  std::vector<SweepRow> rows;
  std::vector<Step> steps;
  for (auto& ip : insts) {
    const Instance& inst = *ip;
    auto work = instance_work(inst);
    SweepRow row;
    row.bytes = work ? static_cast<uint64_t>(work->algbw_bytes) : 0;
    row.target_bytes = row.bytes;
    TimingPlan tp = timing_plan(o.eval, p, inst, true);
    tp.graph = o.graph;
    size_t out_bytes = 0;
    for (auto& t : inst.ranks[0].outputs) out_bytes += t.bytes();
    // Whole outputs travel to the driver only up to 64 MiB per rank; larger sizes are verified
    // through every timed call's fingerprint and samples.
    int trials = out_bytes <= (64u << 20) ? o.eval.trials : 0;
    steps.push_back(Step{&inst, inst.size_name, rng::mix64(p.seed + steps.size()), trials, tp,
                         o.eval.profile_dir.empty() ? 0 : kProfileCalls});
    row.record = start_record(o.eval, p, inst, "sweep");
    row.record.trials = trials;
    rows.push_back(std::move(row));
  }
  std::string base_so, cand_so;
  EvalRecord& first = rows.front().record;
  first.baseline.label = "baseline";
  first.candidate.label = "candidate";
  if (!compile_side(o.eval, p.spec.reference_path(), first.baseline, first, base_so, true) ||
      (with_candidate && !compile_side(o.eval, p.solution_path, first.candidate, first, cand_so, false))) {
    finish_record(o.eval, first, t0);
    return {std::move(rows.front())};
  }
  JobResult base = run_side(o.eval, p, make_plans(p, steps, base_so, "baseline", false), "baseline sweep");
  JobResult cand;
  if (with_candidate && base.status == Status::ok)
    cand = run_side(o.eval, p, make_plans(p, steps, cand_so, "candidate", false), "candidate sweep");
  for (size_t s = 0; s < rows.size(); ++s) {
    EvalRecord& rec = rows[s].record;
    rec.baseline = first.baseline;
    rec.candidate = first.candidate;
    if (base.status != Status::ok) {
      apply_job_failure(base, rec, true);
    } else if (with_candidate && cand.status != Status::ok && static_cast<int>(s) >= cand.step) {
      apply_job_failure(cand, rec, false);  // sizes before the failing one are complete
      if (static_cast<int>(s) > cand.step) rec.message = "not run: an earlier size failed (" + cand.message + ")";
    } else {
      conclude_size(p, *insts[s], base, with_candidate ? &cand : nullptr, s, rows[s]);
    }
    std::vector<ProfiledJob> jobs{{"baseline", &base}};
    if (with_candidate) jobs.emplace_back("candidate", base.status == Status::ok ? &cand : nullptr);
    attach_profiles(o.eval, *insts[s], p.spec.stem + "-" + steps[s].name, jobs, rec, s);
    finish_record(o.eval, rec, t0);
  }
  return rows;
}

std::string link_legend(const nlohmann::json& roofline) {
  if (!roofline.is_object() || roofline.value("link_gbps", 0.0) <= 0) return "%link = busbw / the link rate";
  std::string source = roofline.value("source", std::string("datasheet"));
  return fmt::format("%link = busbw / {:.0f} GB/s, the {} link rate{}", roofline.value("link_gbps", 0.0), source,
                     source == "calibrated" ? "" : " (`pkb calibrate` measures this machine's)");
}

std::string format_sweep_table(const SweepOptions& o, const std::vector<SweepRow>& rows) {
  std::string out;
  if (rows.empty()) return out;
  const EvalRecord& r0 = rows.front().record;
  bool cand = !r0.candidate.path.empty() && r0.candidate.label != "baseline";
  out += fmt::format("pkb sweep {}  W={}  {}  {}{}\n", r0.problem_stem, r0.world, r0.dtype,
                     cand ? "candidate " + r0.candidate.path : "baseline only", o.graph ? "  (+ CUDA-graph replay)" : "");
  out += fmt::format("{:>10} {:>10} {:>10} {:>8} {:>9} {:>9} {:>7}{} {:<10}\n", "size", "base us", cand ? "cand us" : "",
                     cand ? "ratio" : "", "algbw", "busbw", "%link",
                     o.graph ? fmt::format(" {:>10} {:>10}", "base graph", cand ? "cand graph" : "") : "", "status");
  for (auto& row : rows) {
    const EvalRecord& r = row.record;
    double b = r.baseline_timing.us.median, c = r.candidate_timing.us.median;
    const auto& rf = r.roofline;
    std::string graph =
        o.graph ? fmt::format(" {:>10.2f} {:>10}", row.base_graph_us, cand ? fmt::format("{:.2f}", row.cand_graph_us) : "") : "";
    std::string size = format_bytes(static_cast<double>(row.bytes));
    if (!o.classes.empty()) size = r.size_name;
    out += fmt::format("{:>10} {:>10.2f} {:>10} {:>8} {:>9.2f} {:>9.2f} {:>6.1f}%{} {:<10}{}\n", size, b,
                       cand ? fmt::format("{:.2f}", c) : "", cand && c > 0 ? fmt::format("{:.3f}x", b / c) : "",
                       rf.is_object() ? rf.value("algbw_gbps", 0.0) : 0.0, rf.is_object() ? rf.value("busbw_gbps", 0.0) : 0.0,
                       rf.is_object() ? rf.value("link_pct", 0.0) : 0.0, graph, to_string(r.status),
                       r.status == Status::ok ? "" : "  " + r.message.substr(0, 100));
  }
  out += "algbw = size / time; busbw = algbw x the problem's bus factor (GB/s); " + link_legend(r0.roofline) + "\n";
  if (r0.oversubscribed)
    out += fmt::format(
        "NOT A MEASUREMENT: {} ranks share {} GPU(s) (--oversubscribe); only the status column means "
        "anything\n",
        r0.world, r0.gpus_used);
  return out;
}

}  // namespace pkb
