// `pkb eval --full` without GPUs: the --worlds list, the cells a spec allows (world range,
// constraints, the machine), the summary's cell, the verdict over the cells, the records the loop
// appends (read back as the report reads them) and the cells skipped after a build failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "eval/full.hpp"
#include "report/console.hpp"
#include "report/leaderboard.hpp"
#include "report/results.hpp"
#include "spec/registry.hpp"

namespace pkb {
namespace {

// W from 2 to 4, two dtypes, two sizes; "tiny" (M = 6) does not divide by W = 4.
const char* kSpec = R"(
id = 5
name = "scatter"
pattern = "scatter"
summary = "root sends chunk r to rank r"
dtypes = ["bf16", "fp32"]
world = { min = 2, max = 4 }
default_size = "default"
constraints = [ { expr = "M % W == 0", message = "M must divide by W" } ]
[[sizes]]
name = "tiny"
M = 6
N = 8
[[sizes]]
name = "default"
M = 1024
N = 64
[[inputs]]
name = "tensor"
shape = ["M", "N"]
init = { dist = "grid", low = -4, high = 4, scale = 0.5 }
[[outputs]]
name = "out"
shape = ["M / W", "N"]
)";

using State = FullCell::State;

class Full : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("pkb_full_test_" + std::to_string(getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Spec spec;
  void SetUp() override {
    fs::remove_all(dir);
    fs::create_directories(dir / "5_scatter");
    std::ofstream(dir / "5_scatter" / "spec.toml") << kSpec;
    std::ofstream(dir / "5_scatter" / "reference.cu") << "// reference\n";
    spec = load_spec(dir / "5_scatter");
    ::setenv("PKB_CACHE_DIR", (dir / "cache").c_str(), 1);  // the record key for signed records
  }
  void TearDown() override {
    ::unsetenv("PKB_CACHE_DIR");
    fs::remove_all(dir);
  }
  static FullOptions options(std::vector<int> worlds = {}, int gpus = 0, bool oversubscribe = false) {
    FullOptions o;
    o.eval.problem = "5_scatter";
    o.eval.solution = "reference";
    o.eval.gpus = gpus;
    o.eval.oversubscribe = oversubscribe;
    o.worlds = std::move(worlds);
    return o;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

FullCell cell(int w, const char* dtype, const char* size, Status s, std::string message = {}) {
  return {w, dtype, size, State::ran, s, std::move(message)};
}

FullCell refused(int w, const char* dtype, const char* size, std::string why) {
  return {w, dtype, size, State::refused, Status::ok, std::move(why)};
}

TEST(FullWorlds, ParsesACommaSeparatedList) {
  EXPECT_EQ(parse_worlds("2,4,8"), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(parse_worlds(" 4 , 2 "), (std::vector<int>{4, 2}));
  EXPECT_EQ(parse_worlds("3"), (std::vector<int>{3}));
}

TEST(FullWorlds, RejectsMalformedListsAndWorldsBelowTwo) {
  EXPECT_NE(error_of([] { parse_worlds(""); }).find("--worlds '': expects world sizes separated by commas"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("2,,4"); }).find("'' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("2,x"); }).find("--worlds 2,x: expects world sizes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("4.5"); }).find("'4.5' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("2,1"); }).find("every problem needs W >= 2, not 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("-2"); }).find("needs W >= 2, not -2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_worlds("2,4,2"); }).find("2 is listed twice"), std::string::npos);
}

TEST_F(Full, RequestsThatTheSpecRulesOutAreBadInput) {
  EXPECT_EQ(error_of([&] { check_full_request(spec, options({2, 4})); }), "");
  EXPECT_NE(error_of([&] {
              check_full_request(spec, options({2, 8}));
            }).find("--worlds 2,8: 5_scatter runs on 2 to 4 GPUs, not 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_full_request(spec, options({1})); }).find("needs W >= 2, not 1"), std::string::npos);
  // --gpus names the summary's world: it must be one of those run (the defaults within the spec's range).
  EXPECT_EQ(error_of([&] { check_full_request(spec, options({}, 4)); }), "");
  EXPECT_NE(error_of([&] {
              check_full_request(spec, options({}, 3));
            }).find("--gpus 3 (the summary's world size) is not among the world sizes --full runs (2,4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_full_request(spec, options({2}, 4)); }).find("not among the world sizes --full runs (2)"),
            std::string::npos);
  FullOptions sized = options();
  sized.eval.size = "tiny";
  EXPECT_NE(error_of([&] { check_full_request(spec, sized); }).find("--full runs every size class"), std::string::npos);
  FullOptions m = options();
  m.eval.size_overrides = {{"M", 64}};
  EXPECT_NE(error_of([&] { check_full_request(spec, m); }).find("-M, -N or --set"), std::string::npos);
}

TEST_F(Full, EnumeratesWorldsDtypesAndSizesWithTheReasonForEachRefusal) {
  FullPlan plan = plan_full(spec, options(), 4);
  ASSERT_EQ(plan.cells.size(), 12u);  // W = 2, 4, 8 x bf16, fp32 x tiny, default
  std::vector<std::string> names, states;
  for (auto& c : plan.cells) {
    names.push_back(c.name());
    states.push_back(c.status_text());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"W=2 bf16 tiny", "W=2 bf16 default", "W=2 fp32 tiny", "W=2 fp32 default",
                                             "W=4 bf16 tiny", "W=4 bf16 default", "W=4 fp32 tiny", "W=4 fp32 default",
                                             "W=8 bf16 tiny", "W=8 bf16 default", "W=8 fp32 tiny", "W=8 fp32 default"}));
  EXPECT_EQ(states, (std::vector<std::string>{"ok", "ok", "ok", "ok", "refused", "ok", "refused", "ok", "refused", "refused",
                                              "refused", "refused"}));
  EXPECT_NE(plan.cells[4].message.find("M must divide by W"), std::string::npos) << plan.cells[4].message;
  EXPECT_EQ(plan.cells[8].message, "5_scatter runs on 2 to 4 GPUs, not 8");
  // The plain eval's cell on 4 GPUs (W = 4, bf16, the default size) runs first, then the rest in order.
  EXPECT_EQ(plan.cells[plan.summary_cell].name(), "W=4 bf16 default");
  EXPECT_EQ(plan.run_order, (std::vector<size_t>{5, 0, 1, 2, 3, 7}));
  std::string text = format_full_plan(spec, plan, options());
  EXPECT_NE(text.find("pkb eval --full 5_scatter: 12 cells (W = 2,4,8 x bf16,fp32 x tiny,default), 6 to run, 6 refused; "
                      "the summary at W=4 bf16 default\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  refused  W=4 bf16 tiny: "), std::string::npos) << text;
  EXPECT_NE(text.find("  refused  W=8 (every dtype and size): 5_scatter runs on 2 to 4 GPUs, not 8\n"), std::string::npos)
      << text;
}

TEST_F(Full, DefaultWorldsFollowTheMachineAndExplicitOnesMustFitIt) {
  FullPlan two = plan_full(spec, options(), 2);
  EXPECT_EQ(two.cells[5].state, State::refused);
  EXPECT_NE(two.cells[5].message.find("needs 4 GPUs, 2 visible (--oversubscribe"), std::string::npos) << two.cells[5].message;
  EXPECT_EQ(two.cells[two.summary_cell].name(), "W=2 bf16 default");
  FullPlan over = plan_full(spec, options({}, 0, true), 1);  // one GPU: the plain eval's W is the spec's minimum
  EXPECT_EQ(over.cells[5].state, State::ran);
  EXPECT_EQ(over.cells[over.summary_cell].name(), "W=2 bf16 default");
  EXPECT_NE(error_of([&] {
              plan_full(spec, options({2, 4}), 2);
            }).find("--worlds: --gpus 4 but only 2 GPU(s) are visible; add --oversubscribe"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan_full(spec, options(), 1); }).find("--full: no cell of 5_scatter can run at W = 2,4,8"),
            std::string::npos);
}

TEST_F(Full, TheSummaryCellFallsBackToTheNearestWorldThatRuns) {
  EXPECT_EQ(plan_full(spec, options(), 3).cells[plan_full(spec, options(), 3).summary_cell].name(), "W=2 bf16 default");
  FullPlan explicit_gpus = plan_full(spec, options({2, 4}, 2), 8);
  EXPECT_EQ(explicit_gpus.cells[explicit_gpus.summary_cell].name(), "W=2 bf16 default");
  FullPlan only_four = plan_full(spec, options({4}), 8);
  EXPECT_EQ(only_four.cells[only_four.summary_cell].name(), "W=4 bf16 default");
}

TEST(FullVerdictTest, OkOnlyWhenEveryCellThatRanIsOk) {
  FullVerdict v = full_verdict({cell(2, "bf16", "tiny", Status::ok), cell(4, "bf16", "tiny", Status::ok),
                                refused(8, "bf16", "tiny", "runs on 2 to 4 GPUs")});
  EXPECT_EQ(v.status, Status::ok);
  EXPECT_EQ(v.message, "every cell ok (2 cells run; 1 refused)");
  EXPECT_FALSE(v.deciding);
}

TEST(FullVerdictTest, TheFirstCellTheSolutionFailedDecides) {
  FullVerdict v =
      full_verdict({cell(2, "bf16", "tiny", Status::ok), cell(2, "fp32", "tiny", Status::harness_error, "nvcc vanished"),
                    cell(4, "bf16", "tiny", Status::mismatch, "rank 1 output 'out' differs"),
                    cell(4, "fp32", "tiny", Status::flagged, "faster than the floor")});
  EXPECT_EQ(v.status, Status::mismatch);
  ASSERT_TRUE(v.deciding);
  EXPECT_EQ(*v.deciding, 2u);
  EXPECT_EQ(v.message, "W=4 bf16 tiny: mismatch: rank 1 output 'out' differs (3 of 4 cells run failed)");
  FullVerdict flagged =
      full_verdict({cell(2, "bf16", "tiny", Status::flagged, "implausible"), cell(4, "bf16", "tiny", Status::ok)});
  EXPECT_EQ(flagged.status, Status::flagged) << "flagged is not correct";
}

TEST(FullVerdictTest, HarnessErrorsAndUnsupportedCellsAreNotOkButNotCharged) {
  FullVerdict v =
      full_verdict({cell(2, "bf16", "tiny", Status::ok), cell(4, "bf16", "tiny", Status::unsupported, "symmetric memory"),
                    cell(4, "fp32", "tiny", Status::harness_error, "the baseline failed")});
  EXPECT_EQ(v.status, Status::unsupported);
  EXPECT_TRUE(is_not_attempt(v.status));
  EXPECT_EQ(v.message, "W=4 bf16 tiny: unsupported (not charged to the solution): symmetric memory (2 of 3 cells run failed)");
}

EvalRecord record_of(const EvalOptions& e, Status s, std::string message = {}) {
  EvalRecord r;
  r.kind = "eval";
  r.problem_id = 5;
  r.problem_stem = "5_scatter";
  r.candidate.path = "solutions/x/5_scatter.cu";
  r.world = e.gpus;
  r.dtype = e.dtype;
  r.size_name = e.size;
  r.status = s;
  r.message = std::move(message);
  if (s == Status::ok) r.speedup = 1.25;
  return r;
}

TEST(FullSummary, TakesTheDecidingCellsFailureAndListsEveryCell) {
  EvalOptions at_opts;
  at_opts.gpus = 4;
  at_opts.size = "default";
  EvalRecord at = record_of(at_opts, Status::ok);
  EvalRecord bad = record_of(at_opts, Status::crash, "rank 1 died");
  bad.failed_rank = 1;
  bad.failed_phase = "trial 0";
  bad.log_tail = "Segmentation fault";
  std::vector<FullCell> cells{cell(4, "bf16", "default", Status::ok), cell(2, "bf16", "tiny", Status::crash, "rank 1 died")};
  FullVerdict v = full_verdict(cells);
  EvalRecord s = full_summary(at, cells, v, &bad);
  EXPECT_EQ(s.kind, "eval");
  EXPECT_EQ(s.status, Status::crash);
  EXPECT_EQ(s.world, 4) << "the summary stays at its cell";
  EXPECT_EQ(s.speedup.value_or(0), 1.25) << "with that cell's measurements";
  EXPECT_EQ(s.failed_rank, 1);
  EXPECT_EQ(s.log_tail, "Segmentation fault");
  nlohmann::json j = to_json(s);
  ASSERT_TRUE(j.contains("full"));
  EXPECT_EQ(j["full"][1],
            (nlohmann::json{{"world", 2}, {"dtype", "bf16"}, {"size", "tiny"}, {"status", "crash"}, {"message", "rank 1 died"}}));
  EXPECT_FALSE(to_json(at).contains("full")) << "a plain eval record has no `full`";
  EXPECT_NE(format_summary(s, false).find("  full       2 cells: 1 ok, 1 crash\n"), std::string::npos)
      << format_summary(s, false);
}

// Every problem's matrix resolves on the CPU, and its summary is at the plain eval's cell on 8 GPUs.
TEST(FullProblems, EveryProblemPlansItsCells) {
  const char* src = std::getenv("PKB_SOURCE_DIR");
  if (!src) GTEST_SKIP() << "PKB_SOURCE_DIR is not set";
  size_t cells = 0, refused = 0;
  for (auto& entry : discover_problems(fs::path(src) / "problems")) {
    Spec spec = load_spec(entry.dir);
    FullOptions o;
    o.eval.problem = entry.stem;
    FullPlan plan = plan_full(spec, o, 8);
    EXPECT_EQ(plan.cells.size(), 3 * spec.dtypes.size() * spec.sizes.size()) << entry.stem;
    EXPECT_EQ(plan.cells[plan.summary_cell].name(), "W=8 bf16 " + spec.default_size) << entry.stem;
    cells += plan.cells.size();
    refused += plan.cells.size() - plan.run_order.size();
  }
  ::testing::Test::RecordProperty("cells", std::to_string(cells));
  ::testing::Test::RecordProperty("refused", std::to_string(refused));
  EXPECT_GT(cells, 1000u);
  EXPECT_LT(refused, cells / 4) << "most cells run";
}

TEST_F(Full, RunsEveryCellAndAppendsPartsThenTheSummary) {
  FullOptions o = options();
  o.eval.json_out = (dir / "results.jsonl").string();
  o.eval.dump_dir = (dir / "dump").string();
  FullPlan plan = plan_full(spec, o, 4);
  std::vector<EvalOptions> seen;
  auto fake = [&](const EvalOptions& e) {
    seen.push_back(e);
    bool wrong = e.gpus == 2 && e.dtype == "fp32" && e.size == "tiny";
    return record_of(e, wrong ? Status::mismatch : Status::ok, wrong ? "rank 0 output 'out' differs" : "");
  };
  std::ostringstream out;
  EvalRecord s = run_full_plan(o, spec, plan, fake, out);
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0].gpus, 4) << "the summary's cell first";
  EXPECT_EQ(seen[0].dtype, "bf16");
  EXPECT_EQ(seen[0].size, "default");
  EXPECT_EQ(seen[0].json_out, "") << "the loop appends the record itself, as full_part";
  EXPECT_EQ(seen[0].dump_dir, (dir / "dump" / "W4_bf16_default").string());
  EXPECT_EQ(seen[3].gpus, 2);
  EXPECT_EQ(seen[3].dtype, "fp32");
  EXPECT_EQ(seen[3].size, "tiny");

  EXPECT_EQ(s.status, Status::mismatch);
  EXPECT_EQ(s.message, "W=2 fp32 tiny: mismatch: rank 0 output 'out' differs (1 of 6 cells run failed; 6 refused)");
  EXPECT_EQ(s.world, 4);
  EXPECT_EQ(s.full.size(), 12u);

  std::string text = out.str();
  EXPECT_NE(text.find("[1/6] W=4 bf16 default     ok             1.250x"), std::string::npos) << text;
  EXPECT_NE(text.find("[4/6] W=2 fp32 tiny        mismatch       rank 0 output 'out' differs"), std::string::npos) << text;

  auto rows = read_results(o.eval.json_out);
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rows[i].kind, "full_part") << rows[i].source;
    EXPECT_TRUE(rows[i].full.empty());
  }
  EXPECT_EQ(rows[3].status, Status::mismatch);
  const ResultRow& sum = rows.back();
  EXPECT_EQ(sum.kind, "eval");
  EXPECT_EQ(sum.status, Status::mismatch);
  EXPECT_EQ(sum.world, 4);
  EXPECT_EQ(sum.size, "default");
  ASSERT_EQ(sum.full.size(), 12u);
  EXPECT_EQ(sum.full[2].status, Status::mismatch);
  EXPECT_EQ(sum.full[4].state, State::refused);
  EXPECT_NE(sum.full[4].message.find("M must divide by W"), std::string::npos);
  EXPECT_EQ(sum.full[8].message, "5_scatter runs on 2 to 4 GPUs, not 8");

  // The report takes the summary alone: the parts are records of another kind.
  PreparedRows prepared = prepare_rows(rows);
  EXPECT_EQ(prepared.not_eval, 6u);
  ASSERT_EQ(prepared.rows.size(), 1u);
  EXPECT_EQ(prepared.rows[0].status, Status::mismatch);
}

TEST_F(Full, ASolutionThatDoesNotBuildSkipsTheRest) {
  FullOptions o = options();
  FullPlan plan = plan_full(spec, o, 4);
  int calls = 0;
  auto fake = [&](const EvalOptions& e) {
    ++calls;
    EvalRecord r = record_of(e, Status::compile_error, "nvcc rejected x.cu");
    r.compile_log = "x.cu(3): error: expected a ';'";
    return r;
  };
  std::ostringstream out;
  EvalRecord s = run_full_plan(o, spec, plan, fake, out);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.status, Status::compile_error);
  EXPECT_EQ(s.compile_log, "x.cu(3): error: expected a ';'");
  EXPECT_EQ(s.message,
            "W=4 bf16 default: compile_error: nvcc rejected x.cu (1 of 1 cell run failed; 6 refused; 5 skipped "
            "(the solution does not build))");
  EXPECT_EQ(s.full[0].state, State::skipped);
  EXPECT_EQ(s.full[0].message, "not run: the solution does not build (compile_error at W=4 bf16 default)");
  EXPECT_NE(out.str().find("[2/6] W=2 bf16 tiny        skipped: not run: the solution does not build"), std::string::npos)
      << out.str();
}

TEST(FullCellJson, ReadsBackWhatItWritesAndRejectsMalformedEntries) {
  for (const FullCell& c : {cell(2, "bf16", "tiny", Status::timeout, "trial 2"), refused(8, "fp32", "large", "too big"),
                            FullCell{4, "fp16", "small", State::skipped, Status::ok, "not run"}}) {
    auto back = full_cell_from_json(to_json(c));
    ASSERT_TRUE(back) << to_json(c).dump();
    EXPECT_EQ(to_json(*back), to_json(c));
  }
  EXPECT_FALSE(full_cell_from_json(nlohmann::json{{"world", 2}, {"dtype", "bf16"}, {"size", "tiny"}, {"status", "great"}}));
  EXPECT_FALSE(full_cell_from_json(nlohmann::json{{"dtype", "bf16"}, {"size", "tiny"}, {"status", "ok"}}));
  nlohmann::json rec{{"problem", {{"stem", "5_scatter"}}}, {"status", "ok"}, {"full", "all of them"}};
  EXPECT_THROW(row_from_json(rec, "r.jsonl:1"), Error);
}

}  // namespace
}  // namespace pkb
