// `pkb generate <problems|all> --model M`: k samples per problem, written where
// `pkb eval --solutions solutions/<run-name>` evaluates them.
#include <fmt/format.h>
#include <unistd.h>

#include <mutex>

#include "cli/commands.hpp"
#include "cli/gen_flags.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/strings.hpp"
#include "gen/generate.hpp"
#include "spec/registry.hpp"

namespace pkb::cli {

namespace {

struct GenerateFlags {
  std::vector<std::string> problems;
  std::string run_name, out_dir = "solutions";
  int samples = 1, concurrency = 4;
  bool quiet = false;
  PromptFlags p;
  ModelFlags m;
};

/// "all", ids, stems or names, space- or comma-separated, in id order without repeats.
std::vector<ProblemEntry> select_problems(const std::vector<std::string>& words, const std::vector<ProblemEntry>& all) {
  std::vector<ProblemEntry> out;
  for (auto& w : words)
    for (auto& item : split(w, ',')) {
      std::string q(trim(item));
      if (q.empty()) continue;
      if (q == "all") return all;
      const ProblemEntry& e = find_problem(all, q);
      if (std::none_of(out.begin(), out.end(), [&](auto& x) { return x.stem == e.stem; })) out.push_back(e);
    }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  if (out.empty()) fail(Errc::invalid_argument, "no problem named (give ids, stems, names or 'all')");
  return out;
}

int execute(const GenerateFlags& f) {
  LlmConfig llm = llm_config(f.m);
  PromptSetup setup = load_prompt_setup(f.p);
  std::vector<ProblemPrompt> prompts;
  for (auto& e : select_problems(f.problems, discover_problems(problems_dir(f.p.problems_dir)))) {
    Spec spec = load_spec(e.dir);
    int world = world_for(spec, f.p, setup);
    nlohmann::json config{{"world", world},
                          {"size", f.p.size.empty() ? spec.default_size : f.p.size},
                          {"dtype", f.p.dtype},
                          {"backend", f.p.backend.empty() ? setup.templates.default_backend : f.p.backend},
                          {"hardware", setup.hardware_note}};
    prompts.push_back({spec.stem, build_prompt(spec, f.p, setup, world), config});
  }
  GenerateOptions o;
  o.run_name = f.run_name.empty() ? default_run_name(llm) : f.run_name;
  o.run_dir = fs::path(f.out_dir) / o.run_name;
  o.samples = f.samples;
  o.concurrency = f.concurrency;
  o.llm = llm;
  bool tty = isatty(2) && !f.quiet;
  fmt::print(stderr, "[generate] {} problem(s) x {} sample(s) from {} {} into {}; {}\n", prompts.size(), f.samples,
             to_string(llm.provider), llm.model, o.run_dir.string(), setup.hardware_note);
  auto progress = [&](const SampleResult& r, const GenerateSummary& s) {
    std::string what = r.kept ? "kept" : std::string(to_string(r.status)) + fmt::format(" {:.1f} s", r.seconds);
    if (tty) fmt::print(stderr, "\r\033[K[generate] {} (last: {} {})", s.line(), sample_name(r.stem, r.sample), what);
    else if (!f.quiet && !r.kept)
      fmt::print(stderr, "[generate] {} {}{} | {}\n", sample_name(r.stem, r.sample), what,
                 r.message.empty() ? "" : ": " + r.message, s.line());
  };
  GenerateSummary sum = run_generate(
      prompts, o, [&] { return make_chat_model(llm); }, progress);
  if (tty) fmt::print(stderr, "\n");
  fmt::print("{}: {}\n", o.run_dir.string(), sum.line());
  if (sum.failed)
    fmt::print("{} sample(s) failed (see their .json records); run the same command again to retry them\n", sum.failed);
  // The evaluation must use the configuration the prompts promised.
  std::string same = (f.p.gpus > 0 ? fmt::format(" --gpus {}", f.p.gpus) : "") + (f.p.size.empty() ? "" : " --size " + f.p.size) +
                     (f.p.dtype == "bf16" ? "" : " --dtype " + f.p.dtype);
  fmt::print("evaluate: pkb eval --solutions {}{}\n", o.run_dir.string(), same);
  return sum.failed ? 1 : 0;
}

}  // namespace

Command generate_command() {
  return {"generate", "Ask a model for k solutions per problem: solutions/<run-name>/<stem>_s<k>.cu plus a JSON record each",
          [](CLI::App& sub) {
            auto f = std::make_shared<GenerateFlags>();
            sub.add_option("problems", f->problems, "Problems: ids, stems or names (space- or comma-separated), or 'all'")
                ->required();
            sub.add_option("--samples,-k", f->samples, "Samples per problem (files _s0 .. _s<k-1>)");
            sub.add_option("--run-name", f->run_name, "Folder name under --out-dir (default: <provider>_<model>)");
            sub.add_option("--out-dir", f->out_dir, "Where run folders go")->envname("PKB_SOLUTIONS_DIR");
            sub.add_option("--concurrency,-j", f->concurrency, "Requests in flight at once")->envname("PKB_CONCURRENCY");
            sub.add_flag("--quiet,-q", f->quiet, "No progress lines");
            declare_model_flags(sub, f->m);
            declare_prompt_flags(sub, f->p);
            return std::function<int()>([f] { return execute(*f); });
          }};
}

}  // namespace pkb::cli
