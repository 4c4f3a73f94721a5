#include "cli/cmd_batch.hpp"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "batch/batch.hpp"
#include "core/error.hpp"
#include "eval/system.hpp"
#include "spec/registry.hpp"
#include "spec/spec.hpp"

namespace pkb::cli {

namespace fs = std::filesystem;

void declare_batch_flags(CLI::App& sub, BatchFlags& f) {
  sub.add_option("--solutions", f.solutions,
                 "Evaluate every <stem>.cu / <stem>_s<k>.cu in this directory (batch mode; resumable)");
  sub.add_option("--problems", f.problems, "With --solutions: which problems, e.g. 1,2,7 (default: all)");
  sub.add_option("--label", f.label, "The run's name in records and reports (batch default: DIR's name)");
  sub.add_option("--shard", f.shard, "With --solutions: evaluate shard i of n (i/n) — e.g. one Slurm array task each")
      ->envname("PKB_SHARD");
}

namespace {

/// The real evaluator: one run_eval per job, at the world size and dtype of the eval flags.
class RunEvalEvaluator : public BatchEvaluator {
 public:
  explicit RunEvalEvaluator(EvalOptions base) : base_(std::move(base)) {
    require_dtype_name(base_.dtype);
    SystemInfo sys = probe_system();
    if (sys.gpu_count == 0)
      fail(Errc::invalid_argument, "no GPU is visible (" + sys.error + "); pkb eval needs 2 or more NVLink GPUs");
    world_ = base_.gpus > 0 ? base_.gpus : sys.gpu_count;
    place_ranks(world_, sys.gpu_count, base_.oversubscribe);  // refuses W > visible without --oversubscribe
  }

  EvalConfig config_for(const ProblemEntry& problem) override {
    Spec spec = load_spec(problem.dir);
    DType d = spec.dtype_or_default(base_.dtype);
    Instance inst = resolve(spec, world_, {base_.size, base_.size_overrides}, d);
    return {world_, std::string(to_string(d)), inst.size_name};
  }

  EvalRecord evaluate(const BatchJob& job) override {
    EvalOptions o = base_;
    o.problem = job.problem.stem;
    o.solution = job.solution.string();
    o.gpus = world_;
    o.json_out.clear();  // the batch loop appends the record, with label and sample
    o.progress = false;  // the batch draws its own progress bar
    if (!base_.dump_dir.empty()) o.dump_dir = (fs::path(base_.dump_dir) / job.solution.stem()).string();
    return run_eval(o);
  }

 private:
  EvalOptions base_;
  int world_ = 0;
};

std::string default_label(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "solutions/run/" -> "run"
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::absolute(p).lexically_normal().filename().string();
  return name;
}

}  // namespace

int run_eval_batch(const EvalOptions& base, const BatchFlags& f) {
  if (!base.problem.empty())
    fail(Errc::invalid_argument,
         "--solutions evaluates a directory; choose problems with --problems, not '" + base.problem + "'");
  if (!base.solution.empty()) fail(Errc::invalid_argument, "--solution and --solutions cannot be combined");
  auto all = discover_problems(problems_dir(base.problems_dir));
  auto selected = select_problems(all, f.problems);
  fs::path dir = f.solutions;
  std::string label = f.label.empty() ? default_label(dir) : f.label;
  Discovered found = discover_solutions(dir, label, all, selected);
  if (!f.shard.empty()) {
    auto [i, n] = parse_shard(f.shard);
    keep_shard(found, i, n);
  }
  // Default results file: one per run, so `pkb report results/*.jsonl` compares runs.
  fs::path results = base.json_out.empty() ? fs::path("results") / (label + ".jsonl") : fs::path(base.json_out);
  RunEvalEvaluator evaluator(base);
  BatchPlan plan = plan_batch(found, evaluator, finished_evaluations(results));
  ConsoleBatchObserver console(std::cout, std::cerr, base.progress && isatty(2));
  return batch_exit_code(run_batch(plan, evaluator, console, results));
}

}  // namespace pkb::cli
