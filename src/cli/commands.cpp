#include "cli/commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "build/compiler.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/strings.hpp"
#include "eval/system.hpp"
#include "report/record.hpp"
#include "spec/registry.hpp"
#include "spec/spec.hpp"

namespace pkb::cli {

std::vector<Command> command_table() {
  return {list_command(),     show_command(),    run_command(),       eval_command(),  sweep_command(),
          report_command(),   compare_command(), calibrate_command(), build_command(), prompt_command(),
          generate_command(), agent_command(),   version_command()};
}

namespace {
std::vector<std::string>& invocation_storage() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

const std::vector<std::string>& invocation() { return invocation_storage(); }

void set_invocation(int argc, char** argv) { invocation_storage().assign(argv, argv + argc); }

void declare_oversubscribe(CLI::App& sub, bool& flag) {
  sub.add_flag("--oversubscribe", flag,
               "Run W ranks on fewer GPUs (round-robin, each rank its own emulated node over NCCL's socket transport): "
               "verdicts are meaningful, timings are not performance; symmetric memory is unavailable")
      ->envname("PKB_OVERSUBSCRIBE");
}

void declare_profile(CLI::App& sub, std::string& dir) {
  sub.add_option("--profile", dir,
                 "After the timed calls, profile 5 more calls per side with CUPTI (kernels, copies, NCCL) and write "
                 "DIR/<problem>-<side>.trace.json (open it in https://ui.perfetto.dev), DIR/<problem>.trace.json "
                 "(both sides) and DIR/<problem>-<side>.summary.txt; profiled calls are neither checked nor timed")
      ->type_name("DIR")
      ->envname("PKB_PROFILE");
}

CLI::Validator at_least(double lo, std::string hint) {
  return CLI::Validator(
      [lo, hint](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || v >= lo) return {};
        return fmt::format("must be at least {}{}, not {}", lo, hint, text);
      },
      "", "at_least");
}

std::string solution_file_problem(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) return "solution file " + path + " does not exist";
  if (ec) return "solution file " + path + " cannot be read: " + ec.message();
  if (st.type() == std::filesystem::file_type::directory) return "solution file " + path + " is a directory, not a .cu file";
  if (st.type() != std::filesystem::file_type::regular) return "solution file " + path + " is not a regular file";
  if (access(path.c_str(), R_OK) != 0) return "solution file " + path + " is not readable";
  return {};
}

std::string self_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

namespace {

/// `text` cut at a word boundary to at most `width` characters, "..." marking the cut; a first word
/// longer than `width` is kept whole (the column grows rather than cutting it).
std::string clip_words(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t cut = text.rfind(' ', width - 3);
  while (cut != std::string::npos && cut > 0 && (text[cut - 1] == ' ' || text[cut - 1] == ',' || text[cut - 1] == '(')) --cut;
  if (cut == std::string::npos || cut == 0) cut = std::min(text.find(' '), text.size());
  return text.substr(0, cut) + (cut < text.size() ? "..." : "");
}

/// The `pkb list` table. Every column is as wide as its longest entry; names are never shortened,
/// while origin, parallelism and pattern (phrases of up to ~120 characters) are cut at a word.
void print_problem_table(const std::vector<Spec>& specs) {
  constexpr size_t kOrigin = 36, kParallelism = 24, kPattern = 40;
  struct Row {
    std::string id, name, origin, parallelism, pattern, tier;
  };
  std::vector<Row> rows{{"id", "name", "origin", "parallelism", "pattern", "tier"}};
  for (auto& s : specs)
    rows.push_back({std::to_string(s.id), s.name, clip_words(s.origin, kOrigin), clip_words(s.parallelism, kParallelism),
                    clip_words(s.pattern, kPattern), fmt::format("T{}", s.tier)});
  size_t w[5] = {0, 0, 0, 0, 0};
  for (auto& r : rows) {
    w[0] = std::max(w[0], r.id.size());
    w[1] = std::max(w[1], r.name.size());
    w[2] = std::max(w[2], r.origin.size());
    w[3] = std::max(w[3], r.parallelism.size());
    w[4] = std::max(w[4], r.pattern.size());
  }
  for (auto& r : rows)
    fmt::print("{:>{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.id, w[0], r.name, w[1], r.origin, w[2], r.parallelism, w[3],
               r.pattern, w[4], r.tier);
}

}  // namespace

Command list_command() {
  return {"list", "List the problems: id, name, origin, parallelism, pattern, tier", [](CLI::App& sub) {
            auto dir = std::make_shared<std::string>();
            sub.add_option("--problems-dir", *dir, "Problem folders (default: <pkb>/problems)")->envname("PKB_PROBLEMS_DIR");
            return std::function<int()>([dir] {
              auto all = discover_problems(problems_dir(*dir));
              std::vector<Spec> specs;
              size_t broken = 0;
              for (auto& e : all) {
                // One broken spec must not hide the others: it is named on stderr, the rest listed.
                try {
                  specs.push_back(load_spec(e.dir));
                } catch (const Error& err) {
                  ++broken;
                  fmt::print(stderr, "pkb list: skipped {}: {}\n", e.stem, err.what());
                }
              }
              print_problem_table(specs);
              fmt::print("{} problems in {}{}\n", specs.size(), problems_dir(*dir).string(),
                         broken ? fmt::format(" ({} with a broken spec.toml, named on stderr)", broken) : "");
              return broken ? 1 : 0;
            });
          }};
}

namespace {

std::string shape_text(const std::vector<long long>& shape, DType d) {
  std::string s = std::string(to_string(d)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string distinct_text(const Dist& d) {
  std::string draw = fmt::format("{} rows of {} distinct integers in [0, {}), ascending", d.a, d.hi, d.lo);
  switch (static_cast<DistinctView>(static_cast<int32_t>(d.b))) {
    case DistinctView::values: return draw;
    case DistinctView::onehot: return "one-hot [n, k, M] of " + draw;
    case DistinctView::mask: return "membership mask [n, M] of " + draw;
    case DistinctView::grouped: return "row indices grouped by value (ascending within a value) of " + draw;
  }
  return draw;
}

std::string dist_text(const Dist& d) {
  switch (d.kind) {
    case DistKind::normal: return fmt::format("normal(mean {}, std {})", d.a, d.b);
    case DistKind::uniform: return fmt::format("uniform[{}, {})", d.a, d.b);
    case DistKind::grid: return fmt::format("grid: k*{} for integer k in [{}, {}] (exact sums)", d.a, d.lo, d.hi);
    case DistKind::randint: return fmt::format("randint[{}, {}]", d.lo, d.hi);
    case DistKind::zeros: return "zeros";
    case DistKind::ones: return "ones";
    case DistKind::arange: return fmt::format("arange from {}", d.lo);
    case DistKind::split:
      return fmt::format("split: {} of a shared random W x W count matrix, every row and column summing to {}",
                         d.a == 0.0 ? "row rank (sends)" : "column rank (receives)", d.lo);
    case DistKind::spread: return fmt::format("uniform[{}, {}) * 2^-s, s in 0..7", d.lo * d.a, d.hi * d.a);
    case DistKind::distinct: return distinct_text(d);
    case DistKind::owner_ids:
      return fmt::format(
          "ids in [0, {}) whose owners (id mod W) follow row rank of a shared split matrix ({} per row), "
          "in random order",
          d.a, d.lo);
    case DistKind::composition:
      return fmt::format("integers in [0, {}], summing to {} on every rank and to W * {} across ranks at each position", 2 * d.lo,
                         static_cast<long long>(d.a) * d.lo, d.lo);
    case DistKind::offsets:
      return fmt::format("offsets: row pointers of {} rows, lengths in [0, {}], from 0 to {}", static_cast<long long>(d.a) - 1,
                         2 * d.lo, (static_cast<long long>(d.a) - 1) * d.lo);
    case DistKind::permutation: return fmt::format("distinct integers in [0, {}) in random order", d.lo);
  }
  return "?";
}

std::string input_text(const TensorPlan& t, const TensorSpec& spec) {
  std::string s = dist_text(t.dist);
  if (t.dist.shared && !per_rank_part(t.dist)) s += ", same on every rank";
  if (t.dist.share_group >= 0) s += fmt::format(", same on ranks of equal `{}`", spec.init.shared_by.text());
  if (!spec.init.of.empty()) s += fmt::format(" (the draw of `{}`)", spec.init.of);
  if (t.dist.heldout) s += "; held-out calls: " + dist_text(held_out(t.dist));
  if (t.mutable_) s += "; modified in place by the problem";
  return s;
}

std::string output_text(const TensorPlan& t, const TensorSpec& spec) {
  std::string s = "compared: " + comparison_text(t.compare);
  if (t.count_of >= 0)
    s += fmt::format("; ragged: the first `{}` of its {} rows (rows past the count are not compared)", spec.count, t.shape[0]);
  return s;
}

/// Prints ranks with identical tensors together ("ranks 1-3").
void print_tensors(const Instance& inst, bool inputs) {
  const auto& ranks = inst.ranks;
  size_t n = inputs ? ranks[0].inputs.size() : ranks[0].outputs.size();
  for (size_t i = 0; i < n; ++i) {
    int start = 0;
    for (int r = 1; r <= static_cast<int>(ranks.size()); ++r) {
      auto get = [&](int k) -> const TensorPlan& { return inputs ? ranks[k].inputs[i] : ranks[k].outputs[i]; };
      if (r < static_cast<int>(ranks.size()) && same_listing(get(r), get(start))) continue;
      const TensorPlan& t = get(start);
      std::string who = start == r - 1 ? fmt::format("rank {}", start) : fmt::format("ranks {}-{}", start, r - 1);
      fmt::print("  {:<14} {:<10} {:<28} {:>10}  {}\n", t.name, who, shape_text(t.shape, t.dtype),
                 format_bytes(static_cast<double>(t.bytes())),
                 inputs ? input_text(t, inst.spec->inputs[i]) : output_text(t, inst.spec->outputs[i]));
      start = r;
    }
  }
}

}  // namespace

Command show_command() {
  return {"show", "Show a problem: spec, shapes per rank for a world size and size, and the baseline source", [](CLI::App& sub) {
            struct Opts {
              std::string problem, dir, dtype, size;
              int gpus = 0;
              bool no_source = false;
            };
            auto o = std::make_shared<Opts>();
            sub.add_option("problem", o->problem, "Problem id, stem (1_allreduce) or name")->required();
            sub.add_option("--gpus,-g", o->gpus, "World size W (default: visible GPUs, else 4)")
                ->default_str("")  // 0 stands for "all visible"; --help says so in words
                ->check(at_least(1, kGpusHint))
                ->envname("PKB_GPUS");
            sub.add_option("--dtype", o->dtype, "Benchmark dtype D")->envname("PKB_DTYPE");
            sub.add_option("--size,-s", o->size, "Size class (default: the spec's)");
            sub.add_flag("--no-source", o->no_source, "Do not print the baseline source");
            sub.add_option("--problems-dir", o->dir, "Problem folders")->envname("PKB_PROBLEMS_DIR");
            return std::function<int()>([o] {
              auto all = discover_problems(problems_dir(o->dir));
              Spec s = load_spec(find_problem(all, o->problem).dir);
              int w = o->gpus;
              if (w <= 0) {
                auto sys = probe_system();
                w = sys.gpu_count >= s.min_world ? std::min(sys.gpu_count, s.max_world) : 4;
              }
              Instance inst = resolve(s, w, {o->size, {}}, s.dtype_or_default(o->dtype));  // bf16, or the spec's first
              fmt::print("{} — {}\n  {}\n", s.stem, s.pattern, s.summary);
              fmt::print("  origin: {}; parallelism: {}; tier T{}; W in [{}, {}]; dtypes:", s.origin, s.parallelism, s.tier,
                         s.min_world, s.max_world);
              for (auto x : s.dtypes) fmt::print(" {}", to_string(x));
              fmt::print("\n  sizes:");
              for (auto& sc : s.sizes) {
                fmt::print(" {}{}(", sc.name == s.default_size ? "*" : "", sc.name);
                for (size_t i = 0; i < sc.values.size(); ++i)
                  fmt::print("{}{}={}", i ? ", " : "", sc.values[i].first, sc.values[i].second);
                fmt::print(")");
              }
              fmt::print("\n  tolerance: atol {} rtol {}\n", inst.tolerance.atol, inst.tolerance.rtol);
              if (!s.params.empty() || !inst.float_params.empty() || !inst.trial_params.empty()) {
                fmt::print("  params:");
                for (auto& [k, e] : s.params) fmt::print(" {}={}", k, inst.vars.at(k));
                for (auto& [k, x] : inst.float_params) fmt::print(" {}={} (real)", k, x);
                for (auto& p : inst.trial_params) fmt::print(" {} in [{}, {}] (per call)", p.name, p.low, p.high);
                fmt::print("\n");
              }
              fmt::print("\nInstance W={} dtype={} size={}:\n inputs\n", w, to_string(inst.dtype), inst.size_name);
              print_tensors(inst, true);
              fmt::print(" outputs\n");
              print_tensors(inst, false);
              if (!s.groups.empty()) {
                fmt::print(" groups\n");
                for (size_t g = 0; g < s.groups.size(); ++g) {
                  fmt::print("  {:<14}", s.groups[g].name);
                  for (auto& rp : inst.ranks) fmt::print(" r{}:c{}", rp.rank, rp.groups[g].color);
                  fmt::print("\n");
                }
              }
              fmt::print("\nspec: {}\nsha256: {}\n", (s.dir / "spec.toml").string(), s.hash);
              if (!o->no_source)
                fmt::print("\n----- baseline: {} -----\n{}", s.reference_path().string(), read_file(s.reference_path()));
              return 0;
            });
          }};
}

Command build_command() {
  return {"build", "Compile solutions to shared objects (cached), reporting compiler errors and missing entry points",
          [](CLI::App& sub) {
            struct Opts {
              std::vector<std::string> files;
              std::string arch = "sm_90";
              int timeout = 300, jobs = 1;
              bool no_cache = false;
            };
            auto o = std::make_shared<Opts>();
            sub.add_option("files", o->files, "Solution .cu files")->required();
            sub.add_option("--arch", o->arch, "nvcc -arch value")->envname("PKB_ARCH");
            sub.add_option("--compile-timeout", o->timeout, "Seconds before nvcc is stopped");
            sub.add_option("--jobs,-j", o->jobs, "Compile this many files at once")->check(at_least(1));
            sub.add_flag("--no-cache", o->no_cache, "Rebuild even if cached");
            return std::function<int()>([o] {
              // Bad paths are bad input: all of them are named and nothing is compiled (exit 2).
              int bad = 0;
              for (auto& f : o->files) {
                std::string why = solution_file_problem(f);
                if (!why.empty()) std::fprintf(stderr, "pkb: error: %s\n", why.c_str());
                bad += !why.empty();
              }
              if (bad) return 2;
              CompileOptions co;
              co.arch = o->arch;
              co.timeout = std::chrono::seconds(o->timeout);
              co.use_cache = !o->no_cache;
              std::vector<CompileResult> results(o->files.size());
              std::vector<std::string> errors(o->files.size());
              std::atomic<size_t> next{0};
              auto work = [&] {
                for (size_t i; (i = next++) < o->files.size();) {
                  try {
                    results[i] = compile_solution(o->files[i], co);
                  } catch (const std::exception& e) {
                    errors[i] = e.what();
                  }
                }
              };
              std::vector<std::thread> pool;
              for (int t = 0; t < std::max(1, o->jobs); ++t) pool.emplace_back(work);
              for (auto& t : pool) t.join();
              int failed = 0;
              for (size_t i = 0; i < o->files.size(); ++i) {
                const CompileResult& r = results[i];
                if (!errors[i].empty()) {
                  fmt::print("{:<60} error: {}\n", o->files[i], errors[i]);
                  ++failed;
                  continue;
                }
                bool ok = r.ok && r.missing_entry_points.empty();
                failed += !ok;
                fmt::print("{:<60} {}{}\n", o->files[i],
                           ok ? "ok" : (r.ok ? "missing entry points:" : (r.timed_out ? "compile timeout" : "compile error")),
                           r.cached ? " (cached)" : fmt::format(" ({:.1f} s)", r.seconds));
                for (auto& m : r.missing_entry_points) fmt::print("    {}\n", m);
                if (!r.ok) fmt::print("{}\n", r.log);
              }
              return failed ? 1 : 0;
            });
          }};
}

Command version_command() {
  return {"version", "Print versions of pkb, its record schema, CUDA and NCCL", [](CLI::App&) {
            return std::function<int()>([] {
              auto s = probe_system();
              fmt::print("pkb {} (record schema {})\nCUDA runtime {}, driver {}, NCCL {}\nGPUs visible: {}{}\n", kHarnessVersion,
                         kSchemaVersion, cuda_version_string(s.cuda_runtime), cuda_version_string(s.cuda_driver),
                         nccl_version_string(s.nccl), s.gpu_count, s.gpu_count ? " x " + s.gpu_name : " (" + s.error + ")");
              return 0;
            });
          }};
}

}  // namespace pkb::cli
