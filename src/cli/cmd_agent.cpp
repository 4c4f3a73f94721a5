// `pkb agent <problem> --model M --steps S`: the model revises one solution, judged by `pkb eval`
// in this process after every step (the driver never loads candidate code, so this is safe).
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/gen_flags.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "eval/evaluator.hpp"
#include "gen/agent.hpp"
#include "spec/registry.hpp"

namespace pkb::cli {

namespace {

struct AgentFlags {
  std::string problem, run_name, out_dir = "solutions", json_out, arch = "sm_90";
  int steps = 5, trials = 5, warmup = 500, iters = 100, compile_timeout = 300;
  double target = 1.0, timeout_s = 60;
  bool quiet = false, oversubscribe = false, profile = false;
  PromptFlags p;
  ModelFlags m;
};

/// Evaluates candidates with the real harness: baseline and candidate jobs on real GPUs.
class HarnessEvaluator final : public CandidateEvaluator {
 public:
  /// `profile_root`: with --profile, each step's profile goes to profile_root/<step file's stem>.
  HarnessEvaluator(EvalOptions base, fs::path profile_root) : base_(std::move(base)), profile_root_(std::move(profile_root)) {}
  EvalRecord evaluate(const fs::path& candidate) override {
    EvalOptions o = base_;
    o.solution = candidate.string();
    if (!profile_root_.empty()) o.profile_dir = (profile_root_ / candidate.stem()).string();
    return run_eval(o);
  }

 private:
  EvalOptions base_;
  fs::path profile_root_;
};

EvalOptions eval_options(const AgentFlags& f, const std::string& stem, int world) {
  EvalOptions o;
  o.problem = stem;
  o.gpus = world;
  o.oversubscribe = f.oversubscribe;
  o.dtype = f.p.dtype;
  o.size = f.p.size;
  o.trials = f.trials;
  o.warmup = f.warmup;
  o.iters = f.iters;
  o.timeout_s = f.timeout_s;
  o.json_out = f.json_out;
  o.problems_dir = f.p.problems_dir;
  o.compile.arch = f.arch;
  o.compile.timeout = std::chrono::seconds(f.compile_timeout);
  o.progress = false;  // the agent prints its own lines
  o.worker_exe = self_dir() + "/pkb-worker";
  return o;
}

int execute(const AgentFlags& f) {
  LlmConfig llm = llm_config(f.m);
  PromptSetup setup = load_prompt_setup(f.p);
  Spec spec = load_spec(find_problem(discover_problems(problems_dir(f.p.problems_dir)), f.problem).dir);
  int world = world_for(spec, f.p, setup);
  // Check before the first (paid) request that every candidate can actually be evaluated here.
  if (setup.visible_gpus < 1)
    fail(Errc::invalid_argument, fmt::format("pkb agent evaluates every step on {} GPUs, but none is visible here", world));
  place_ranks(world, setup.visible_gpus, f.oversubscribe);  // W > visible needs --oversubscribe
  Prompt prompt = build_prompt(spec, f.p, setup, world);
  std::string run_name = f.run_name.empty() ? default_run_name(llm) : f.run_name;
  AgentOptions o;
  o.problem = spec.stem;
  o.dir = fs::path(f.out_dir) / run_name / "agent" / spec.stem;
  o.steps = f.steps;
  o.target_speedup = f.target;
  o.provenance = fmt::format("{}/{}, problem {}", to_string(llm.provider), llm.model, spec.stem);
  o.meta = {{"provider", to_string(llm.provider)},
            {"model", llm.model},
            {"base_url", llm.endpoint()},
            {"parameters", llm.parameters()},
            {"prompt_sha256", prompt.sha256()},
            {"eval", {{"world", world}, {"dtype", f.p.dtype}, {"size", f.p.size}, {"trials", f.trials}}}};
  if (!f.quiet) o.progress = [](const std::string& line) { fmt::print(stderr, "[agent] {}\n", line); };
  auto model = make_chat_model(llm);
  fs::path profile_root = f.profile ? o.dir / "profile" : fs::path();
  HarnessEvaluator evaluator(eval_options(f, spec.stem, world), profile_root);
  AgentResult r = run_agent(*model, evaluator, prompt, setup.templates, o);
  if (r.best_step)
    fmt::print("best: step {} ({}) -> {}\n", r.best_step,
               r.best_speedup ? fmt::format("speedup {:.2f}x", *r.best_speedup) : "passed", (o.dir / "best.cu").string());
  else fmt::print("no passing candidate in {} step(s)\n", r.steps_run);
  fmt::print("stopped: {}\ntranscript: {}\n", r.stop_reason, r.transcript.string());
  return r.best_step ? 0 : 1;
}

}  // namespace

Command agent_command() {
  return {"agent", "Let a model revise a solution over several steps, evaluating each on the GPUs and feeding back the result",
          [](CLI::App& sub) {
            auto f = std::make_shared<AgentFlags>();
            sub.add_option("problem", f->problem, "Problem id (1), stem (1_allreduce) or name (allreduce)")->required();
            sub.add_option("--steps", f->steps, "Most model calls (each reply is evaluated)")->envname("PKB_AGENT_STEPS");
            sub.add_option("--target-speedup", f->target, "Stop at the first passing candidate at least this fast (0: any pass)");
            sub.add_option("--run-name", f->run_name, "Folder name under --out-dir (default: <provider>_<model>)");
            sub.add_option("--out-dir", f->out_dir, "Where run folders go (the agent writes <run>/agent/<stem>/)")
                ->envname("PKB_SOLUTIONS_DIR");
            sub.add_option("--trials", f->trials, "Correctness trials per evaluation")->check(at_least(1))->envname("PKB_TRIALS");
            declare_oversubscribe(sub, f->oversubscribe);
            sub.add_option("--warmup", f->warmup, "Warm-up calls before timing")->check(at_least(0))->envname("PKB_WARMUP");
            sub.add_option("--iters", f->iters, "Timed calls")->check(at_least(1))->envname("PKB_ITERS");
            sub.add_option("--timeout", f->timeout_s, "Deadline in seconds per evaluation phase")->envname("PKB_TIMEOUT");
            sub.add_option("--json", f->json_out, "Also append every step's evaluation record to this JSON Lines file");
            sub.add_option("--arch", f->arch, "nvcc -arch for candidates")->envname("PKB_ARCH");
            sub.add_option("--compile-timeout", f->compile_timeout, "Seconds before nvcc is stopped");
            sub.add_flag("--profile", f->profile,
                         "Profile each step's calls with CUPTI after its timed ones and put the candidate's summary "
                         "(at most 2 KB: kernels' time, communication overlap, bandwidth) in the next prompt; traces go to "
                         "<run>/agent/<stem>/profile/<step>/");
            sub.add_flag("--quiet,-q", f->quiet, "No progress lines");
            declare_model_flags(sub, f->m);
            declare_prompt_flags(sub, f->p);
            return std::function<int()>([f] { return execute(*f); });
          }};
}

}  // namespace pkb::cli
