#include "eval/full.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/interrupt.hpp"
#include "core/strings.hpp"
#include "eval/internal.hpp"
#include "eval/system.hpp"
#include "report/record_mac.hpp"
#include "spec/registry.hpp"

namespace pkb {

namespace {

/// "2,4,8"
template <typename T, typename Show>
std::string join(const std::vector<T>& xs, Show show) {
  std::string s;
  for (auto& x : xs) {
    if (!s.empty()) s += ',';
    s += show(x);
  }
  return s;
}

std::string join_ints(const std::vector<int>& xs) {
  return join(xs, [](int x) { return std::to_string(x); });
}

std::vector<int> worlds_of(const FullOptions& o) {
  return o.worlds.empty() ? std::vector<int>(std::begin(kFullDefaultWorlds), std::end(kFullDefaultWorlds)) : o.worlds;
}

bool in_range(const Spec& spec, int w) { return w >= spec.min_world && w <= spec.max_world; }

}  // namespace

std::vector<int> parse_worlds(const std::string& text) {
  auto bad = [&](const std::string& why) {
    fail(Errc::invalid_argument, "--worlds " + (text.empty() ? std::string("''") : text) + ": " + why);
  };
  std::vector<int> out;
  for (auto& item : split(text, ',')) {
    std::string_view t = trim(item);
    int w = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), w);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size())
      bad("expects world sizes separated by commas, such as 2,4,8 ('" + std::string(t) + "' is not a whole number)");
    if (w < 2) bad("every problem needs W >= 2, not " + std::to_string(w));
    if (std::find(out.begin(), out.end(), w) != out.end()) bad(std::to_string(w) + " is listed twice");
    out.push_back(w);
  }
  if (out.empty()) bad("expects world sizes separated by commas, such as 2,4,8");
  return out;
}

void check_full_request(const Spec& spec, const FullOptions& o) {
  if (!o.eval.size.empty() || !o.eval.size_overrides.empty())
    fail(Errc::invalid_argument, "--full runs every size class: it does not go with --size, -M, -N or --set");
  for (int w : o.worlds) {
    if (w < 2)
      fail(Errc::invalid_argument, "--worlds " + join_ints(o.worlds) + ": every problem needs W >= 2, not " + std::to_string(w));
    if (!in_range(spec, w))
      fail(Errc::invalid_argument, "--worlds " + join_ints(o.worlds) + ": " + spec.stem + " runs on " +
                                       std::to_string(spec.min_world) + " to " + std::to_string(spec.max_world) + " GPUs, not " +
                                       std::to_string(w));
  }
  if (o.eval.gpus > 0) {
    std::vector<int> run;
    for (int w : worlds_of(o))
      if (in_range(spec, w)) run.push_back(w);
    if (std::find(run.begin(), run.end(), o.eval.gpus) == run.end())
      fail(Errc::invalid_argument, "--gpus " + std::to_string(o.eval.gpus) +
                                       " (the summary's world size) is not among the world sizes --full runs (" + join_ints(run) +
                                       "); name it in --worlds, or leave --gpus out");
  }
}

namespace {

/// Why W cannot run on this machine ("" when it can), by the placement rule of plain eval.
std::string machine_refusal(int w, int visible, bool oversubscribe, bool explicit_world) {
  try {
    (void)place_ranks(w, visible, oversubscribe);
    return "";
  } catch (const Error& e) {
    if (explicit_world) fail(Errc::invalid_argument, std::string("--worlds: ") + e.what());
  }
  return "needs " + std::to_string(w) + " GPUs, " + std::to_string(visible) +
         " visible (--oversubscribe runs it on them: verdicts only)";
}

size_t choose_summary_cell(const Spec& spec, const FullOptions& o, int visible, const std::vector<FullCell>& cells) {
  int world = world_for_run(o.eval.gpus, visible, spec.min_world, o.eval.oversubscribe);
  std::string dtype = o.eval.dtype;
  auto d = parse_dtype(dtype);
  if (!d || std::find(spec.dtypes.begin(), spec.dtypes.end(), *d) == spec.dtypes.end())
    dtype = std::string(to_string(spec.default_dtype()));
  const std::string& size = spec.default_size;
  std::optional<size_t> below, above, first;
  for (size_t i = 0; i < cells.size(); ++i) {
    const FullCell& c = cells[i];
    if (c.state != FullCell::State::ran) continue;
    if (!first) first = i;
    if (c.dtype != dtype || c.size != size) continue;
    if (c.world == world) return i;
    if (c.world < world && (!below || c.world > cells[*below].world)) below = i;
    if (c.world > world && (!above || c.world < cells[*above].world)) above = i;
  }
  if (below) return *below;
  if (above) return *above;
  return *first;  // the caller made sure that some cell runs
}

}  // namespace

FullPlan plan_full(const Spec& spec, const FullOptions& o, int visible) {
  FullPlan plan;
  bool explicit_worlds = !o.worlds.empty();
  std::string first_reason;
  for (int w : worlds_of(o)) {
    std::string world_refusal;
    if (!in_range(spec, w))
      world_refusal = spec.stem + " runs on " + std::to_string(spec.min_world) + " to " + std::to_string(spec.max_world) +
                      " GPUs, not " + std::to_string(w);
    else world_refusal = machine_refusal(w, visible, o.eval.oversubscribe, explicit_worlds);
    for (DType d : spec.dtypes)
      for (auto& sc : spec.sizes) {
        FullCell c{w, std::string(to_string(d)), sc.name};
        if (!world_refusal.empty()) {
          c.state = FullCell::State::refused;
          c.message = world_refusal;
        } else {
          try {
            (void)resolve(spec, w, SizeChoice{sc.name, {}}, d);
          } catch (const Error& e) {
            if (e.code() != Errc::invalid_argument) throw;
            c.state = FullCell::State::refused;
            c.message = e.what();
          }
        }
        if (c.state == FullCell::State::refused && first_reason.empty()) first_reason = c.name() + ": " + c.message;
        plan.cells.push_back(std::move(c));
      }
  }
  bool any = std::any_of(plan.cells.begin(), plan.cells.end(), [](auto& c) { return c.state == FullCell::State::ran; });
  if (!any)
    fail(Errc::invalid_argument, "--full: no cell of " + spec.stem + " can run at W = " + join_ints(worlds_of(o)) +
                                     (first_reason.empty() ? "" : " (" + first_reason + ")"));
  plan.summary_cell = choose_summary_cell(spec, o, visible, plan.cells);
  plan.run_order.push_back(plan.summary_cell);
  for (size_t i = 0; i < plan.cells.size(); ++i)
    if (i != plan.summary_cell && plan.cells[i].state == FullCell::State::ran) plan.run_order.push_back(i);
  return plan;
}

FullVerdict full_verdict(const std::vector<FullCell>& cells) {
  size_t ran = 0, failed = 0, refused = 0, skipped = 0;
  std::optional<size_t> charged, not_charged;
  for (size_t i = 0; i < cells.size(); ++i) {
    const FullCell& c = cells[i];
    if (c.state == FullCell::State::refused) ++refused;
    if (c.state == FullCell::State::skipped) ++skipped;
    if (c.state != FullCell::State::ran) continue;
    ++ran;
    if (c.status == Status::ok) continue;
    ++failed;
    std::optional<size_t>& slot = is_not_attempt(c.status) ? not_charged : charged;
    if (!slot) slot = i;
  }
  std::string rest;
  if (refused) rest += fmt::format("; {} refused", refused);
  if (skipped) rest += fmt::format("; {} skipped (the solution does not build)", skipped);
  if (ran == 0) return {Status::harness_error, "no cell ran" + rest, std::nullopt};
  if (!charged && !not_charged)
    return {Status::ok, fmt::format("every cell ok ({} cell{} run{})", ran, ran == 1 ? "" : "s", rest), std::nullopt};
  size_t d = charged ? *charged : *not_charged;
  const FullCell& c = cells[d];
  std::string message = fmt::format("{}: {}{}{}{} ({} of {} cell{} run failed{})", c.name(), to_string(c.status),
                                    charged ? "" : " (not charged to the solution)", c.message.empty() ? "" : ": ", c.message,
                                    failed, ran, ran == 1 ? "" : "s", rest);
  return {c.status, std::move(message), d};
}

EvalRecord full_summary(EvalRecord at, const std::vector<FullCell>& cells, const FullVerdict& verdict,
                        const EvalRecord* deciding) {
  at.kind = "eval";
  at.status = verdict.status;
  at.message = verdict.message;
  at.full = cells;
  if (deciding) {
    at.failed_rank = deciding->failed_rank;
    at.failed_phase = deciding->failed_phase;
    at.log_tail = deciding->log_tail;
    at.compile_log = deciding->compile_log;
  }
  return at;
}

EvalOptions cell_options(const EvalOptions& base, const FullCell& cell) {
  EvalOptions e = base;
  e.gpus = cell.world;
  e.dtype = cell.dtype;
  e.size = cell.size;
  e.size_overrides.clear();
  e.json_out.clear();
  if (!base.dump_dir.empty())
    e.dump_dir = (fs::path(base.dump_dir) / ("W" + std::to_string(cell.world) + "_" + cell.dtype + "_" + cell.size)).string();
  return e;
}

std::string format_full_plan(const Spec& spec, const FullPlan& plan, const FullOptions& o) {
  std::vector<int> worlds = worlds_of(o);
  std::string dtypes = join(spec.dtypes, [](DType d) { return std::string(to_string(d)); });
  std::string sizes = join(spec.sizes, [](const SizeClass& sc) { return sc.name; });
  size_t refused = plan.cells.size() - plan.run_order.size();
  std::string s =
      fmt::format("pkb eval --full {}: {} cells (W = {} x {} x {}), {} to run, {} refused; the summary at {}{}\n", spec.stem,
                  plan.cells.size(), join_ints(worlds), dtypes, sizes, plan.run_order.size(), refused,
                  plan.cells.at(plan.summary_cell).name(), o.eval.json_out.empty() ? "" : ", records to " + o.eval.json_out);
  size_t per_world = spec.dtypes.size() * spec.sizes.size();
  for (size_t begin = 0; begin + per_world <= plan.cells.size(); begin += per_world) {
    auto first = plan.cells.begin() + static_cast<std::ptrdiff_t>(begin);
    auto last = first + static_cast<std::ptrdiff_t>(per_world);
    bool whole = std::all_of(
        first, last, [&](const FullCell& c) { return c.state == FullCell::State::refused && c.message == first->message; });
    if (whole) {
      s += fmt::format("  refused  W={} (every dtype and size): {}\n", first->world, first->message);
      continue;
    }
    for (auto it = first; it != last; ++it)
      if (it->state == FullCell::State::refused) s += fmt::format("  refused  {}: {}\n", it->name(), it->message);
  }
  return s;
}

std::string format_cell_line(size_t index, size_t total, const FullCell& cell, const EvalRecord* r) {
  int digits = static_cast<int>(std::to_string(total).size());
  std::string counter = fmt::format("[{:>{}}/{}]", index + 1, digits, total);
  if (cell.state != FullCell::State::ran || !r)
    return fmt::format("{} {:<20} {}: {}\n", counter, cell.name(), cell.status_text(), cell.message);
  std::string detail;
  if (r->status != Status::ok) detail = r->message.size() > 100 ? r->message.substr(0, 99) + "…" : r->message;
  else if (r->oversubscribed) detail = "correct (oversubscribed)";
  else detail = r->speedup ? fmt::format("{:.3f}x", *r->speedup) : "correct (not timed)";
  return fmt::format("{} {:<20} {:<14} {:<36} {:.1f} s\n", counter, cell.name(), to_string(r->status), detail, r->wall_s);
}

namespace {

void append_record(const std::string& path, const EvalRecord& r) {
  if (!path.empty()) append_line(path, signed_record(to_json(r)).dump());
}

}  // namespace

EvalRecord run_full_plan(const FullOptions& o, const Spec& spec, FullPlan plan, const CellEvaluator& evaluate,
                         std::ostream& out) {
  auto t0 = Clock::now();
  out << format_full_plan(spec, plan, o) << std::flush;
  std::vector<std::optional<EvalRecord>> records(plan.cells.size());
  std::string build_failure;  // set once a cell's solution did not build: the rest are skipped
  size_t total = plan.run_order.size();
  for (size_t k = 0; k < total; ++k) {
    size_t i = plan.run_order[k];
    FullCell& c = plan.cells[i];
    if (!build_failure.empty()) {
      c.state = FullCell::State::skipped;
      c.message = build_failure;
      out << format_cell_line(k, total, c, nullptr) << std::flush;
      continue;
    }
    check_interrupted();
    EvalRecord rec = evaluate(cell_options(o.eval, c));
    rec.kind = "full_part";
    append_record(o.eval.json_out, rec);
    c.status = rec.status;
    c.message = rec.message;
    if (rec.status == Status::compile_error || rec.status == Status::load_error)
      build_failure = fmt::format("not run: the solution does not build ({} at {})", to_string(rec.status), c.name());
    out << format_cell_line(k, total, c, &rec) << std::flush;
    records[i] = std::move(rec);
  }
  FullVerdict verdict = full_verdict(plan.cells);
  const EvalRecord* deciding = nullptr;
  if (verdict.deciding && *verdict.deciding != plan.summary_cell && records[*verdict.deciding])
    deciding = &*records[*verdict.deciding];
  EvalRecord summary = full_summary(*records.at(plan.summary_cell), plan.cells, verdict, deciding);
  summary.timestamp = now_iso8601();
  summary.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  append_record(o.eval.json_out, summary);
  return summary;
}

EvalRecord run_full(const FullOptions& o, std::ostream& out) {
  auto all = discover_problems(problems_dir(o.eval.problems_dir));
  Spec spec = load_spec(find_problem(all, o.eval.problem).dir);
  detail::check_eval_options(o.eval);
  check_full_request(spec, o);
  SystemInfo sys = probe_system();
  if (sys.gpu_count == 0)
    fail(Errc::invalid_argument, "no GPU is visible (" + sys.error + "); pkb run/eval need 2 or more NVLink GPUs");
  FullPlan plan = plan_full(spec, o, sys.gpu_count);
  return run_full_plan(o, spec, std::move(plan), run_eval, out);
}

}  // namespace pkb
