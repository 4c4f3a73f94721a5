// `pkb run` and `pkb eval`: the flags they share are declared once, here.
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "cli/cmd_batch.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "eval/evaluator.hpp"
#include "eval/full.hpp"
#include "eval/profile_out.hpp"
#include "report/console.hpp"

namespace pkb::cli {

namespace {

struct SharedFlags {
  EvalOptions opts;
  std::optional<std::string> dtype;  // given (flag or PKB_DTYPE); else EvalOptions' default
  std::optional<long long> m, n;
  std::vector<std::string> sets;
  bool no_perf = false, perf = false, quiet = false;
  std::string arch = "sm_90";
  int compile_timeout = 300;
  std::string seed;
  BatchFlags batch;  // eval only: --solutions DIR
  std::string mpirun = "mpirun";
  bool full = false;  // eval only: every cell of the spec (eval/full.hpp)
  std::optional<std::string> worlds;  // with --full
};

void declare(CLI::App& sub, SharedFlags& f, bool is_eval) {
  auto* problem = sub.add_option("problem", f.opts.problem, "Problem id (1), stem (1_allreduce) or name (allreduce)");
  if (is_eval) declare_batch_flags(sub, f.batch);  // with --solutions DIR no problem is named
  else problem->required();
  sub.add_option("--solution,-S", f.opts.solution,
                 is_eval ? "Candidate .cu file (required; 'reference' evaluates the baseline against itself)"
                         : "Solution .cu file (default: the problem's baseline, reference.cu)")
      ->envname("PKB_SOLUTION");
  sub.add_option("--gpus,-g", f.opts.gpus, "World size W: GPUs to use (default: all visible)")
      ->default_str("")  // 0 stands for "all visible"; --help says so in words
      ->check(at_least(1, kGpusHint))
      ->envname("PKB_GPUS");
  declare_oversubscribe(sub, f.opts.oversubscribe);
  sub.add_option("--dtype", f.dtype,
                 "Benchmark dtype D: bf16, fp16 or fp32 (default bf16, or the spec's first dtype where it has no bf16)")
      ->envname("PKB_DTYPE");
  sub.add_option("--size,-s", f.opts.size, "Named size class from the spec (`pkb show` lists them)")->envname("PKB_SIZE");
  sub.add_option("-M", f.m, "Override the size variable M")->check(at_least(1));
  sub.add_option("-N", f.n, "Override the size variable N")->check(at_least(1));
  sub.add_option("--set", f.sets, "Override any size variable: --set K=4096 (repeatable)")->default_str("");
  sub.add_option("--trials", f.opts.trials, "Correctness trials, each with fresh inputs")
      ->check(at_least(1))
      ->envname("PKB_TRIALS");
  sub.add_option("--atol", f.opts.atol, "Absolute tolerance (default: the spec's, usually 1e-2)")->check(at_least(0));
  sub.add_option("--rtol", f.opts.rtol, "Relative tolerance (default: the spec's, usually 1e-2)")->check(at_least(0));
  sub.add_option("--warmup", f.opts.warmup, "Warm-up calls before timing (capped at ~2 s)")
      ->check(at_least(0))
      ->envname("PKB_WARMUP");
  sub.add_option("--iters", f.opts.iters, "Timed calls (each checked)")->check(at_least(1))->envname("PKB_ITERS");
  if (is_eval) sub.add_flag("--no-perf", f.no_perf, "Check correctness only; no timing");
  if (is_eval)
    sub.add_flag("--unchecked-timing", f.opts.unchecked_timing,
                 "Skip the per-call checks of timed calls (to measure what they cost; the run is flagged)");
  if (is_eval) {
    sub.add_option("--interleave", f.opts.interleave,
                   "Time baseline and candidate in alternating rounds of R calls, both jobs alive (speedup: median of "
                   "the rounds' ratios, with a 95% interval; 0: one job after the other). For trusted solutions: a "
                   "candidate's leftover GPU work could slow the baseline's rounds")
        ->check(at_least(0))
        ->envname("PKB_INTERLEAVE");
    sub.add_option("--unstable-bound", f.opts.unstable_bound,
                   "With --interleave: mark the record unstable when the interval reaches beyond this fraction of the "
                   "speedup on either side (default 0.02)")
        ->check(at_least(0));
  }
  if (is_eval) {
    sub.add_flag("--full", f.full,
                 "Evaluate every (world size, dtype, size class) cell the spec allows, each an eval of its own, and "
                 "record one verdict over all of them");
    sub.add_option("--worlds", f.worlds,
                   "With --full: the world sizes, e.g. 2,4 (default 2,4,8 where the spec and the GPUs allow)");
  }
  if (!is_eval) sub.add_flag("--perf", f.perf, "Also time the solution");
  sub.add_option(
         "--timeout", f.opts.timeout_s,
         "Deadline in seconds per phase (each trial; setup and pkb_init get at least 60, finalize 30; the timed phase gets 5x)")
      ->envname("PKB_TIMEOUT");
  sub.add_option("--json", f.opts.json_out, "Append the record as one JSON line to this file")->envname("PKB_JSON");
  declare_profile(sub, f.opts.profile_dir);
  sub.add_option("--dump", f.opts.dump_dir, "Write inputs and outputs per trial and rank as safetensors under this directory");
  if (!is_eval) sub.add_flag("--oracle", f.opts.oracle, "Compare outputs with the problem's CPU double-precision oracle");
  sub.add_option("--arch", f.arch, "nvcc -arch for solutions")->envname("PKB_ARCH");
  sub.add_option("--compile-timeout", f.compile_timeout, "Seconds before nvcc is stopped");
  sub.add_option("--launcher", f.opts.launcher, "local (fork/exec, default) or mpi (mpirun/srun; see docs/multi-node.md)")
      ->transform(CLI::Validator(
          [](std::string& name) -> std::string {  // the name, as LauncherKind's number for CLI11 to store
            if (name != "local" && name != "mpi") return "must be local or mpi, not '" + name + "'";
            name = std::to_string(static_cast<int>(name == "local" ? LauncherKind::local : LauncherKind::mpi));
            return "";
          },
          "local|mpi"))
      ->default_str("local")
      ->envname("PKB_LAUNCHER");
  sub.add_option("--mpirun", f.mpirun, "With --launcher mpi: the launcher command and its flags, e.g. \"mpirun --hostfile h\"")
      ->envname("PKB_MPIRUN");
  sub.add_option("--bind", f.opts.mpi.bind_address, "With --launcher mpi: address the driver listens on (0.0.0.0: all)");
  sub.add_option("--advertise", f.opts.mpi.advertise_host, "With --launcher mpi: the address workers dial back");
  sub.add_option("--seed", f.seed, "Reproduce a recorded run's inputs (hex seed from its record); default: fresh and secret");
  sub.add_option("--problems-dir", f.opts.problems_dir, "Problem folders (default: <pkb>/problems)")->envname("PKB_PROBLEMS_DIR");
  sub.add_flag("--quiet,-q", f.quiet, "No progress line");
}

/// --full and --worlds against the other flags: wrong whatever the machine, so refused first.
void check_full_flags(const SharedFlags& f, const EvalOptions& o, bool batch) {
  if (f.worlds && !f.full) throw Error(Errc::invalid_argument, "--worlds goes with --full");
  if (!f.full) return;
  if (batch) throw Error(Errc::invalid_argument, "--full evaluates one solution: it does not go with --solutions DIR");
  if (f.dtype)
    throw Error(Errc::invalid_argument, "--full runs every dtype the spec allows: it does not go with --dtype (or PKB_DTYPE)");
  if (!o.size.empty() || !o.size_overrides.empty())
    throw Error(Errc::invalid_argument,
                "--full runs every size class: it does not go with --size, -M, -N or --set (or PKB_SIZE)");
}

int execute_full(const SharedFlags& f, const EvalOptions& o) {
  FullOptions fo{o, f.worlds ? parse_worlds(*f.worlds) : std::vector<int>{}};
  EvalRecord rec = run_full(fo, std::cout);
  std::cout.flush();
  print_summary(rec, stdout);
  if (!o.json_out.empty())
    fmt::print("  records    appended to {} (one full_part per cell run, then this summary)\n", o.json_out);
  return exit_code_for(rec);
}

int execute(SharedFlags& f, bool is_eval) {
  EvalOptions o = f.opts;
  o.argv = invocation();
  if (f.dtype) o.dtype = *f.dtype;
  if (f.m) o.size_overrides.emplace_back("M", *f.m);
  if (f.n) o.size_overrides.emplace_back("N", *f.n);
  for (auto& s : f.sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw Error(Errc::invalid_argument, "--set expects NAME=VALUE, not '" + s + "'");
    try {
      o.size_overrides.emplace_back(s.substr(0, eq), std::stoll(s.substr(eq + 1)));
    } catch (const std::exception&) {
      throw Error(Errc::invalid_argument, "--set " + s + ": the value must be an integer");
    }
  }
  bool batch = is_eval && !f.batch.solutions.empty();
  check_full_flags(f, o, batch);
  if (!o.profile_dir.empty() && (batch || f.full))
    throw Error(Errc::invalid_argument,
                std::string("--profile profiles one eval: it does not go with ") + (batch ? "--solutions DIR" : "--full"));
  if (f.worlds) (void)parse_worlds(*f.worlds);  // a malformed list is named before anything else is looked at
  if (is_eval && !batch) {
    if (!f.batch.problems.empty()) throw Error(Errc::invalid_argument, "--problems goes with --solutions DIR");
    if (o.problem.empty()) throw Error(Errc::invalid_argument, "pkb eval needs a problem (or --solutions DIR for a batch)");
    if (o.solution.empty()) throw Error(Errc::invalid_argument, "pkb eval needs --solution FILE.cu (or --solution reference)");
    o.label = f.batch.label;
  }
  if (!batch && !o.solution.empty() && o.solution != "reference" && o.solution != "baseline") {
    std::string why = solution_file_problem(o.solution);
    if (!why.empty()) throw Error(Errc::invalid_argument, why);
  }
  o.perf = is_eval ? !f.no_perf : f.perf;
  if (o.interleave > 0 && o.perf && (o.iters + o.interleave - 1) / o.interleave < 6)
    fmt::print(stderr,
               "pkb: --interleave {} with --iters {} gives {} round(s): a 95% interval needs 6 (the record will say "
               "unstable)\n",
               o.interleave, o.iters, (o.iters + o.interleave - 1) / o.interleave);
  if (!f.seed.empty()) {
    try {
      o.seed = std::stoull(f.seed, nullptr, 16);
    } catch (const std::exception&) {
      throw Error(Errc::invalid_argument, "--seed expects a hex number");
    }
  }
  o.mpi.command.clear();
  {
    std::istringstream words(f.mpirun);
    for (std::string w; words >> w;) o.mpi.command.push_back(w);
    if (o.mpi.command.empty()) throw Error(Errc::invalid_argument, "--mpirun is empty");
  }
  o.compile.arch = f.arch;
  o.compile.timeout = std::chrono::seconds(f.compile_timeout);
  o.progress = !f.quiet && isatty(2);
  o.worker_exe = self_dir() + "/pkb-worker";
  if (batch) return run_eval_batch(o, f.batch);
  if (f.full) return execute_full(f, o);
  EvalRecord rec = is_eval ? run_eval(o) : run_dry(o);
  print_summary(rec, stdout);
  fmt::print("{}", profile_lines(rec.profile));
  if (!o.json_out.empty()) fmt::print("  record     appended to {}\n", o.json_out);
  return exit_code_for(rec);
}

Command make(bool is_eval) {
  std::string help = is_eval ? "Evaluate a candidate against the baseline: trials, per-call checks, timing, speedup"
                             : "Run one solution alone (PKB's dryrun): sanity checks, optional oracle and timing";
  return {is_eval ? "eval" : "run", help, [is_eval](CLI::App& sub) {
            auto f = std::make_shared<SharedFlags>();
            if (!is_eval) f->opts.trials = 1;
            declare(sub, *f, is_eval);
            return std::function<int()>([f, is_eval] { return execute(*f, is_eval); });
          }};
}

}  // namespace

Command run_command() { return make(false); }
Command eval_command() { return make(true); }

}  // namespace pkb::cli
