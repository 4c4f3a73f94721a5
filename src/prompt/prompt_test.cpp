// Prompt rendering: the template syntax, the template file's validation, section choice and the
// real prompts.toml rendered for real problems.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "prompt/prompt.hpp"
#include "prompt/template.hpp"
#include "prompt/templates.hpp"
#include "spec/registry.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Template, ReplacesPlaceholdersAndKeepsValuesVerbatim) {
  TemplateVars v{{"name", "allreduce"}, {"code", "int f() { return {1}; }"}};
  EXPECT_EQ(render_template("solve {name}: {code}", v, "t"), "solve allreduce: int f() { return {1}; }");
  EXPECT_EQ(render_template("{{literal}} {name}}}", v, "t"), "{literal} allreduce}");
  EXPECT_EQ(render_template("no placeholders", {}, "t"), "no placeholders");
  EXPECT_EQ(template_placeholders("{a} {b} {a} {{c}}", "t"), (std::set<std::string>{"a", "b"}));
}

TEST(Template, MissingPlaceholderIsAClearError) {
  TemplateVars v{{"problem_summary", "x"}};
  std::string e = error_of([&] { render_template("line one\nsee {problem_sumary}\n", v, "prompts.toml [prompt].user"); });
  EXPECT_NE(e.find("prompts.toml [prompt].user, line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("no value for placeholder {problem_sumary}"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean {problem_summary}"), std::string::npos) << e;
}

TEST(Template, StrayAndUnclosedBracesAreErrors) {
  EXPECT_NE(error_of([] { render_template("a } b", {}, "t"); }).find("stray '}'"), std::string::npos);
  EXPECT_NE(error_of([] {
              render_template("{problem summary}", {{"problem", "x"}}, "t");
            }).find("not closed"),
            std::string::npos);
  EXPECT_NE(error_of([] { render_template("for (;;) { }", {}, "t"); }).find("must start a placeholder"), std::string::npos);
  EXPECT_NE(error_of([] { render_template("end {", {}, "t"); }).find("line 1"), std::string::npos);
}

// A small template file with two backends and two precisions, to see that sections are picked.
const char* kSmall = R"(
[meta]
default_backend = "cuda"
[prompt]
system = "SYS {backend_display}"
user = """
TASK {problem_stem} W={world}
{problem_readme}
PREC {precision_display}: {precision_notes}
HW {hardware}
EX {examples}
"""
[task]
readme = "README<{readme}>"
[hardware]
measured = "{gpu_count} x {gpu_name} for W={world}"
unmeasured = "unmeasured W={world}"
[examples]
intro_one = "ONE:"
intro_many = "MANY:"
entry = "[{example_label}|{example_problem}|{example_solution_path}|{example_solution}]"
[backends.cuda]
display = "CUDA"
guidance = "g1"
[backends.other]
display = "OTHER"
guidance = "g2"
[precision.bf16]
display = "bf16!"
notes = "n-bf16"
[precision.fp32]
display = "fp32!"
notes = "n-fp32"
[feedback]
compile_error = "c"
load_error = "l"
runtime_failure = "r"
mismatch = "m"
flagged = "f"
passed = "p"
no_code_block = "n"
)";

PromptInputs small_inputs() {
  PromptInputs in;
  in.problem = {{"problem_stem", "9_thing"}, {"world", "4"}, {"dtype", "bf16"}};
  return in;
}

TEST(RenderPrompt, PicksBackendAndPrecisionSections) {
  PromptTemplates t = parse_templates(kSmall, "small.toml");
  PromptInputs in = small_inputs();
  Prompt p = render_prompt(t, in);
  EXPECT_EQ(p.system, "SYS CUDA\n");
  EXPECT_NE(p.user.find("TASK 9_thing W=4"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("PREC bf16!: n-bf16"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("HW unmeasured W=4"), std::string::npos) << p.user;
  EXPECT_EQ(p.user.find("README<"), std::string::npos) << "no README, no README section";

  in.backend = "other";
  in.problem["dtype"] = "fp32";
  in.readme = "notes";
  in.hardware = TemplateVars{{"gpu_count", "8"}, {"gpu_name", "H200"}};
  in.examples = {{"Ex A", "1_allreduce", "", "", "sol.cu", "A"}, {"Ex B", "2_allgather", "", "", "sol2.cu", "B"}};
  Prompt q = render_prompt(t, in);
  EXPECT_EQ(q.system, "SYS OTHER\n");
  EXPECT_NE(q.user.find("PREC fp32!: n-fp32"), std::string::npos) << q.user;
  EXPECT_NE(q.user.find("README<notes>"), std::string::npos) << q.user;
  EXPECT_NE(q.user.find("HW 8 x H200 for W=4"), std::string::npos) << q.user;
  EXPECT_NE(q.user.find("EX MANY:\n[Ex A|1_allreduce|sol.cu|A]\n[Ex B|2_allgather|sol2.cu|B]"), std::string::npos) << q.user;
  EXPECT_NE(p.sha256(), q.sha256());
  EXPECT_EQ(q.sha256(), render_prompt(t, in).sha256()) << "rendering is deterministic";

  in.examples.resize(1);
  EXPECT_NE(render_prompt(t, in).user.find("EX ONE:\n[Ex A|"), std::string::npos);
}

TEST(RenderPrompt, UnknownBackendPrecisionOrPlaceholderIsAnError) {
  PromptTemplates t = parse_templates(kSmall, "small.toml");
  PromptInputs in = small_inputs();
  in.backend = "triton";
  std::string e = error_of([&] { render_prompt(t, in); });
  EXPECT_NE(e.find("unknown backend 'triton'"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda, other"), std::string::npos) << e;
  in = small_inputs();
  in.problem["dtype"] = "fp16";
  EXPECT_NE(error_of([&] { render_prompt(t, in); }).find("[precision.fp16]"), std::string::npos);
  in = small_inputs();
  in.problem.erase("world");
  e = error_of([&] { render_prompt(t, in); });
  EXPECT_NE(e.find("no value for placeholder {world}"), std::string::npos) << e;
}

TEST(TemplateFile, ValidatesKeysAndSyntaxWhenLoaded) {
  std::string missing = kSmall;
  missing.replace(missing.find("no_code_block = \"n\""), 19, "");
  EXPECT_NE(error_of([&] { parse_templates(missing, "x.toml"); }).find("missing key feedback.no_code_block"), std::string::npos);
  std::string broken = kSmall;
  broken.replace(broken.find("\"g1\""), 4, "\"use { braces\"");
  std::string e = error_of([&] { parse_templates(broken, "x.toml"); });
  EXPECT_NE(e.find("backends.cuda.guidance"), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_templates("[meta", "x.toml"); }).find("x.toml"), std::string::npos);
}

// The real template file, rendered for real problems.
class RealPrompt : public ::testing::Test {
 protected:
  PromptTemplates t = load_templates(pkb_home() / "prompts" / "prompts.toml");
  std::vector<ProblemEntry> all = discover_problems(pkb_home() / "problems");
  Prompt prompt_for(const std::string& problem, std::optional<HardwareFacts> hw = std::nullopt, int world = 4,
                    const std::string& dtype = "bf16") {
    spec = load_spec(find_problem(all, problem).dir);
    PromptRequest req;
    req.world = world;
    req.dtype = dtype;
    req.hardware = hw;
    req.home = pkb_home();
    return render_prompt(t, gather_prompt_inputs(t, spec, req));
  }
  /// The prompt of a problem written here: `folder` with `toml` as its spec, rendered at W = `world`.
  Prompt prompt_of_spec(const std::string& folder, const std::string& toml, int world) {
    fs::path dir = fs::temp_directory_path() / ("pkb_prompt_test_" + std::to_string(::getpid())) / folder;
    fs::create_directories(dir);
    std::ofstream(dir / "reference.cu") << "// reference\n";
    std::ofstream(dir / "spec.toml") << toml;
    spec = load_spec(dir);
    PromptRequest req;
    req.world = world;
    req.dtype = "bf16";
    req.home = pkb_home();
    Prompt p = render_prompt(t, gather_prompt_inputs(t, spec, req));
    fs::remove_all(dir.parent_path());
    return p;
  }
  Spec spec;
};

TEST_F(RealPrompt, ContainsTaskBaselineAbiShapesRulesAndTheExample) {
  Prompt p = prompt_for("2");
  EXPECT_NE(p.user.find("# Task: 2_allgather"), std::string::npos);
  EXPECT_NE(p.user.find(spec.summary), std::string::npos);
  EXPECT_NE(p.user.find(read_file(spec.reference_path())), std::string::npos) << "the baseline, verbatim";
  EXPECT_NE(p.user.find("typedef struct pkb_symmetric"), std::string::npos) << "the ABI header";
  EXPECT_NE(p.user.find("World size W = 4"), std::string::npos);
  EXPECT_NE(p.user.find("`tensor` on ranks 0-3: bf16[1024, 1024]"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("Outputs of pkb_run"), std::string::npos);
  EXPECT_NE(p.user.find("NVLink multicast"), std::string::npos) << "the rules";
  EXPECT_NE(p.user.find("has not been measured"), std::string::npos);
  std::string example = read_file(pkb_home() / "solutions" / "examples" / "1_allreduce_oneshot.cu");
  EXPECT_NE(p.user.find(example), std::string::npos) << "the example solution, verbatim";
  EXPECT_NE(p.user.find("# Worked example\n"), std::string::npos);
  EXPECT_NE(p.system.find("CUDA"), std::string::npos);
}

TEST_F(RealPrompt, NeverShowsAProblemItsOwnSolution) {
  Prompt p = prompt_for("1");
  EXPECT_EQ(p.user.find("oneshot_allreduce"), std::string::npos);
  EXPECT_EQ(p.user.find("Worked example"), std::string::npos);
}

TEST_F(RealPrompt, HeldOutCallsAreStated) {
  Prompt p = prompt_for("1");
  EXPECT_NE(p.user.find("in held-out calls, off-grid values: uniform in [-2, 2)"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("Held-out calls (trials 1, 3, ... and every warm-up and timed call)"), std::string::npos);
  EXPECT_NE(p.user.find("at most 0.0078125"), std::string::npos);
}

TEST_F(RealPrompt, RealAndPerCallParamsAndSubgroupDrawsAreStated) {
  Prompt p = prompt_of_spec("99_params", R"(
id = 99
name = "params"
pattern = "p"
summary = "s"
params = { lr = 0.001, step = { trial_low = 1, trial_high = 7 } }
[[sizes]]
name = "s"
M = 8
[[inputs]]
name = "x"
shape = ["M"]
init = { dist = "normal", shared_by = "rank // 2" }
[[outputs]]
name = "y"
shape = ["M"]
)",
                            4);
  EXPECT_NE(p.user.find("Real parameters: lr = 0.001 (ctx->fparam"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("Per-call parameter `step`: an integer in [1, 7]"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("identical on the ranks with the same value of `rank // 2`"), std::string::npos) << p.user;
  EXPECT_EQ(p.user.find("Held-out calls (trials"), std::string::npos) << "no grid input, no held-out rule";
}

TEST_F(RealPrompt, ARaggedOutputsCountIsStated) {
  Prompt p = prompt_of_spec("98_ragged", R"(
id = 98
name = "ragged"
pattern = "p"
summary = "s"
[[sizes]]
name = "s"
M = 8
[[inputs]]
name = "x"
shape = ["M", 2]
[[outputs]]
name = "kept"
shape = ["M", 2]
count = "n_kept"
[[outputs]]
name = "n_kept"
dtype = "int64"
shape = [1]
)",
                            2);
  EXPECT_NE(p.user.find("ragged: its first dimension (8 rows) is a capacity, and output `n_kept` must hold how many rows"),
            std::string::npos)
      << p.user;
}

TEST_F(RealPrompt, PerRankShapesFollowTheWorldSize) {
  Prompt p = prompt_for("5_scatter", std::nullopt, 2);
  EXPECT_NE(p.user.find("`tensor` on rank 0: bf16[2, 1024, 1024]"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("`tensor` on rank 1: bf16[1024, 1024]"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("root = 0"), std::string::npos);
}

TEST_F(RealPrompt, MeasuredHardwareGivesNumbersAndAFloor) {
  HardwareFacts h;
  h.gpu_name = "NVIDIA H200";
  h.gpu_count = 4;
  h.topology = "NV18 between every pair";
  h.link_store_gbps = 400;
  h.hbm_gbps = 4000;
  h.flag_rtt_us = 2.5;
  Prompt p = prompt_for("1", h);
  EXPECT_NE(p.user.find("4 x NVIDIA H200"), std::string::npos) << p.user;
  EXPECT_NE(p.user.find("NV18 between every pair"), std::string::npos);
  EXPECT_NE(p.user.find("SM stores 400 GB/s"), std::string::npos);
  EXPECT_NE(p.user.find("copy engine not measured"), std::string::npos);
  EXPECT_NE(p.user.find("flag round trip 2.5 us"), std::string::npos);
  // 2 (W-1)/W * 2 MiB = 3 MiB over links at 400 GB/s = 7.9 us; 4 MiB through HBM at 4000 GB/s = 1.0 us.
  EXPECT_NE(p.user.find("about 7.9 us per call"), std::string::npos) << p.user;
  EXPECT_EQ(p.user.find("has not been measured"), std::string::npos);
}

TEST_F(RealPrompt, DtypeAliasesPickThePrecisionSection) {
  Prompt p = prompt_for("2", std::nullopt, 4, "float32");
  EXPECT_NE(p.user.find("benchmark dtype fp32."), std::string::npos) << p.user.substr(0, 1500);
  EXPECT_NE(p.user.find("fp32[1024, 1024] (4 MiB)"), std::string::npos);
}

TEST_F(RealPrompt, BadConfigurationIsRejectedBeforeRendering) {
  EXPECT_NE(error_of([&] { prompt_for("1", std::nullopt, 16); }).find("not 16"), std::string::npos);
  EXPECT_NE(error_of([&] { prompt_for("1", std::nullopt, 4, "int7"); }).find("unknown dtype 'int7'"), std::string::npos);
}

}  // namespace
}  // namespace pkb
