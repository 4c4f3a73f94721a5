// Batch evaluation without GPUs: file discovery and naming, problem selection, resuming from a
// results file, failures and Ctrl-C in the middle of a batch, label and sample in the records, and
// the console lines. A fake evaluator stands in for run_eval.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "batch/batch.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/interrupt.hpp"
#include "report/results.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

std::vector<ProblemEntry> problems() {
  return {{1, "1_allreduce", "allreduce", "p/1_allreduce"},
          {2, "2_allgather", "allgather", "p/2_allgather"},
          {7, "7_reducescatter", "reducescatter", "p/7_reducescatter"}};
}

/// Stands in for run_eval: a status per file name (ok by default), or an exception.
class FakeEvaluator : public BatchEvaluator {
 public:
  std::map<std::string, Status> status;
  std::map<std::string, std::string> throws;  // file name -> "error" or "interrupt"
  std::vector<std::string> evaluated;
  int world = 4;

  EvalConfig config_for(const ProblemEntry&) override { return {world, "bf16", "default"}; }
  EvalRecord evaluate(const BatchJob& job) override {
    std::string name = job.solution.filename().string();
    if (throws[name] == "interrupt") throw Interrupted();
    if (throws[name] == "error") throw Error(Errc::invalid_argument, "problem needs 8 GPUs");
    evaluated.push_back(name);
    EvalRecord r;
    r.problem_id = job.problem.id;
    r.problem_stem = job.problem.stem;
    r.candidate = {"candidate", job.solution.string(), job.sha256};
    r.world = world;
    r.dtype = "bf16";
    r.size_name = "default";
    r.status = status.count(name) ? status[name] : Status::ok;
    if (r.status == Status::ok) r.speedup = 1.5;
    else r.message = "3 of 16 elements wrong";
    return r;
  }
};

/// Records what the observer is told.
struct QuietObserver : BatchObserver {
  std::vector<std::string> not_run_why;
  void planned(const BatchPlan&, const fs::path&) override {}
  void started(size_t, size_t, const BatchJob&) override {}
  void finished(size_t, size_t, const BatchJob&, const EvalRecord&) override {}
  void not_run(size_t, size_t, const BatchJob&, const std::string& why) override { not_run_why.push_back(why); }
  void done(const BatchSummary&) override {}
};

class Batch : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("pkb_batch_" + std::to_string(getpid()));
    fs::remove_all(root_);
    dir_ = root_ / "model-a";
    fs::create_directories(dir_);
    for (const char* f :
         {"1_allreduce_s0.cu", "1_allreduce_s1.cu", "2_allgather.cu", "7_reducescatter_s0.cu", "1_allreduce_oneshot.cu"})
      write(f, std::string("// ") + f + "\n");
    std::ofstream(dir_ / "notes.txt") << "not a solution";
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  Discovered discover(const std::string& selection = "1,2") {
    return discover_solutions(dir_, "model-a", problems(), select_problems(problems(), selection));
  }

  fs::path root_, dir_;
};

TEST(BatchNames, StemOrStemWithSampleIndex) {
  auto all = problems();
  auto m = parse_solution_name("1_allreduce.cu", all);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->first->stem, "1_allreduce");
  EXPECT_EQ(m->second, 0);
  m = parse_solution_name("7_reducescatter_s12.cu", all);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->first->id, 7);
  EXPECT_EQ(m->second, 12);
  for (const char* no : {"1_allreduce_oneshot.cu", "1_allreduce_s.cu", "1_allreduce_sx.cu", "9_nothing_s1.cu",
                         "1_allreduce_s2.cuh", "allreduce_s1.cu", ".cu"})
    EXPECT_FALSE(parse_solution_name(no, all)) << no;
}

TEST(BatchNames, ProblemSelection) {
  auto all = problems();
  auto s = select_problems(all, "2_allgather, 1,allreduce");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].id, 1);
  EXPECT_EQ(s[1].id, 2);
  EXPECT_EQ(select_problems(all, "all").size(), 3u);
  EXPECT_EQ(select_problems(all, "").size(), 3u);
  try {
    select_problems(all, "1,allreduc3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
  EXPECT_THROW(select_problems(all, "99"), Error);
}

TEST_F(Batch, DiscoversMatchingFilesProblemAfterProblem) {
  Discovered d = discover();
  ASSERT_EQ(d.jobs.size(), 3u);
  EXPECT_EQ(d.jobs[0].solution.filename(), "1_allreduce_s0.cu");
  EXPECT_EQ(d.jobs[1].sample, 1);
  EXPECT_EQ(d.jobs[2].problem.stem, "2_allgather");
  EXPECT_EQ(d.jobs[2].sample, 0);
  EXPECT_EQ(d.jobs[0].label, "model-a");
  EXPECT_EQ(d.jobs[0].sha256, sha256_hex("// 1_allreduce_s0.cu\n"));
  // 7_reducescatter_s0.cu names a real problem that is not selected: not "ignored".
  EXPECT_EQ(d.ignored, (std::vector<std::string>{"1_allreduce_oneshot.cu"}));
}

TEST_F(Batch, BadInputIsOneClearError) {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::internal;
  };
  EXPECT_EQ(code_of([&] { discover_solutions(root_ / "missing", "x", problems(), problems()); }), Errc::invalid_argument);
  fs::create_directories(root_ / "empty");
  EXPECT_EQ(code_of([&] { discover_solutions(root_ / "empty", "x", problems(), problems()); }), Errc::invalid_argument);
  write("2_allgather_s0.cu", "// same sample as 2_allgather.cu\n");
  EXPECT_EQ(code_of([&] { discover(); }), Errc::invalid_argument);
}

TEST_F(Batch, RecordsCarryLabelAndSampleAndTheBatchResumes) {
  fs::path results = root_ / "results" / "model-a.jsonl";
  FakeEvaluator ev;
  ev.status["1_allreduce_s1.cu"] = Status::mismatch;
  QuietObserver quiet;
  BatchSummary s = run_batch(plan_batch(discover(), ev, finished_evaluations(results)), ev, quiet, results);
  EXPECT_EQ(s.evaluated, 3u);
  EXPECT_EQ(batch_exit_code(s), 0);
  auto rows = read_results(results);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].label, "model-a");
  EXPECT_EQ(rows[1].sample, 1);
  EXPECT_EQ(rows[1].status, Status::mismatch);

  // Everything is done: a second run evaluates nothing.
  BatchPlan again = plan_batch(discover(), ev, finished_evaluations(results));
  EXPECT_TRUE(again.todo.empty());
  EXPECT_EQ(again.skipped.size(), 3u);

  // A changed file, and a different world size, are new evaluations.
  write("1_allreduce_s1.cu", "// fixed\n");
  again = plan_batch(discover(), ev, finished_evaluations(results));
  ASSERT_EQ(again.todo.size(), 1u);
  EXPECT_EQ(again.todo[0].solution.filename(), "1_allreduce_s1.cu");
  ev.world = 2;
  EXPECT_EQ(plan_batch(discover(), ev, finished_evaluations(results)).todo.size(), 3u);
}

TEST_F(Batch, HarnessErrorsAreRetriedOnResume) {
  fs::path results = root_ / "r.jsonl";
  FakeEvaluator ev;
  ev.status["2_allgather.cu"] = Status::harness_error;
  QuietObserver quiet;
  BatchSummary s = run_batch(plan_batch(discover(), ev, {}), ev, quiet, results);
  EXPECT_EQ(batch_exit_code(s), 3);
  BatchPlan again = plan_batch(discover(), ev, finished_evaluations(results));
  ASSERT_EQ(again.todo.size(), 1u);
  EXPECT_EQ(again.todo[0].problem.stem, "2_allgather");
}

TEST_F(Batch, OneFailureDoesNotStopTheBatch) {
  fs::path results = root_ / "r.jsonl";
  FakeEvaluator ev;
  ev.throws["1_allreduce_s1.cu"] = "error";
  QuietObserver quiet;
  BatchSummary s = run_batch(plan_batch(discover(), ev, {}), ev, quiet, results);
  EXPECT_EQ(s.evaluated, 2u);
  EXPECT_EQ(s.not_run, 1u);
  EXPECT_EQ(ev.evaluated, (std::vector<std::string>{"1_allreduce_s0.cu", "2_allgather.cu"}));
  ASSERT_EQ(quiet.not_run_why.size(), 1u);
  EXPECT_EQ(quiet.not_run_why[0], "problem needs 8 GPUs");
  EXPECT_EQ(read_results(results).size(), 2u);
  EXPECT_EQ(batch_exit_code(s), 3);
}

TEST_F(Batch, InterruptStopsAndKeepsWhatIsRecorded) {
  fs::path results = root_ / "r.jsonl";
  FakeEvaluator ev;
  ev.throws["1_allreduce_s1.cu"] = "interrupt";
  QuietObserver quiet;
  BatchSummary s = run_batch(plan_batch(discover(), ev, {}), ev, quiet, results);
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(batch_exit_code(s), 130);
  EXPECT_EQ(ev.evaluated, (std::vector<std::string>{"1_allreduce_s0.cu"}));  // 2_allgather never started
  EXPECT_EQ(read_results(results).size(), 1u);
  // Resuming evaluates exactly what is missing.
  BatchPlan rest = plan_batch(discover(), ev, finished_evaluations(results));
  EXPECT_EQ(rest.todo.size(), 2u);
  EXPECT_EQ(rest.skipped.size(), 1u);
}

TEST_F(Batch, ConsoleLinesAndProgressBar) {
  FakeEvaluator ev;
  ev.status["2_allgather.cu"] = Status::mismatch;
  std::ostringstream out, err;
  ConsoleBatchObserver console(out, err, true);
  run_batch(plan_batch(discover(), ev, {}), ev, console, root_ / "r.jsonl");
  std::string o = out.str();
  for (const char* want : {"pkb eval --solutions: 3 evaluations of 2 problems (run 'model-a')",
                           "ignored (no problem of that name): 1_allreduce_oneshot.cu", "[1/3] 1_allreduce_s0.cu", "1.500x",
                           "[3/3] 2_allgather.cu", "mismatch", "3 of 16 elements wrong", "done: 3 evaluated (2 ok, 1 mismatch)"})
    EXPECT_NE(o.find(want), std::string::npos) << want << "\n" << o;
  EXPECT_EQ(o.find("\033["), std::string::npos) << "stdout stays plain";
  EXPECT_NE(err.str().find("] 0/3 done, evaluating 1_allreduce_s0.cu"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  ConsoleBatchObserver no_bar(out2, err2, false);
  run_batch(plan_batch(discover(), ev, {}), ev, no_bar, root_ / "r2.jsonl");
  EXPECT_TRUE(err2.str().empty());
}

}  // namespace
}  // namespace pkb

namespace pkb {
namespace {

TEST(Shard, ParsesAndSplitsDisjointly) {
  EXPECT_EQ(parse_shard("0/4"), (std::pair<int, int>{0, 4}));
  EXPECT_EQ(parse_shard("3/4"), (std::pair<int, int>{3, 4}));
  for (const char* bad : {"4/4", "-1/4", "1", "a/b", "1/0", ""}) EXPECT_THROW(parse_shard(bad), Error) << bad;
  Discovered all;
  for (int k = 0; k < 10; ++k) all.jobs.push_back(BatchJob{ProblemEntry{k / 3 + 1, "p", "p", {}}, "f", k % 3, "run", ""});
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 3; ++i) {
    Discovered d = all;
    keep_shard(d, i, 3);
    for (auto& j : d.jobs)
      for (size_t k = 0; k < all.jobs.size(); ++k)
        if (all.jobs[k].problem.id == j.problem.id && all.jobs[k].sample == j.sample) ++seen[k];
  }
  for (int k = 0; k < 10; ++k) EXPECT_EQ(seen[k], 1) << k;  // every job in exactly one shard
}

}  // namespace
}  // namespace pkb
