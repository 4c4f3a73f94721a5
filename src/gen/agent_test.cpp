// The agent loop's control flow, with the fake endpoint as the model and a fake evaluator that
// judges candidates by a word in their code, so no GPU is needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "fake_llm.hpp"
#include "gen/agent.hpp"

namespace pkb {
namespace {

using fake::FakeLlmServer;
using fake::Reply;
using nlohmann::json;

/// BROKEN -> compile_error, WRONG -> mismatch, CRASH -> crash, HARNESS -> harness_error,
/// SPEED=<x> -> ok with speedup x.
class FakeEvaluator final : public CandidateEvaluator {
 public:
  std::vector<fs::path> seen;
  EvalRecord evaluate(const fs::path& candidate) override {
    seen.push_back(candidate);
    std::string code = read_file(candidate);
    EvalRecord r;
    if (code.find("BROKEN") != std::string::npos) {
      r.status = Status::compile_error;
      r.message = "nvcc failed";
      r.compile_log = "step.cu(3): error: identifier \"undefined_thing\" is undefined\n1 error detected\n";
    } else if (code.find("WRONG") != std::string::npos) {
      r.status = Status::mismatch;
      r.message = "trial 0 rank 1 output 'out': 4096 of 4096 elements differ";
      r.add_check(false, "trial 0 rank 1 output 'out'", "first mismatch at index 0: got 2, expected 1");
    } else if (code.find("CRASH") != std::string::npos) {
      r.status = Status::crash;
      r.message = "rank 1 died with signal 11 (Segmentation fault)";
      r.failed_rank = 1;
      r.failed_phase = "trial 0";
      r.log_tail = "a line\nthe segfault happened here\n";
    } else if (code.find("HARNESS") != std::string::npos) {
      r.status = Status::harness_error;
      r.message = "the baseline failed: NCCL error";
    } else if (auto pos = code.find("SPEED="); pos != std::string::npos) {
      r.status = Status::ok;
      r.speedup = std::stod(code.substr(pos + 6));
      r.baseline_timing.measured = r.candidate_timing.measured = true;
      r.baseline_timing.us.median = 30.0;
      r.candidate_timing.us.median = 30.0 / *r.speedup;
      r.roofline = {{"pct", 42.0}, {"floor_us", 7.9}, {"bound", "link"}};
    }
    return r;
  }
};

class Agent : public ::testing::Test {
 protected:
  fs::path dir;
  PromptTemplates templates = load_templates(pkb_home() / "prompts" / "prompts.toml");
  Prompt prompt{"SYSTEM", "FIRST PROMPT"};
  FakeEvaluator evaluator;
  std::vector<std::string> lines;

  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("pkb_agent_test_" + std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  AgentResult run(FakeLlmServer& s, int steps, double target = 1.0) {
    LlmConfig cfg;
    cfg.model = "fake";
    cfg.base_url = s.url("/v1");
    cfg.max_retries = 0;
    AgentOptions o;
    o.problem = "1_allreduce";
    o.dir = dir;
    o.steps = steps;
    o.target_speedup = target;
    o.provenance = "openai/fake, problem 1_allreduce";
    o.progress = [this](const std::string& l) { lines.push_back(l); };
    auto model = make_chat_model(cfg);
    return run_agent(*model, evaluator, prompt, templates, o);
  }
  json transcript() { return json::parse(read_file(dir / "transcript.json")); }
  /// The newest user message of request i.
  static std::string last_user(const fake::Request& r) { return r.json()["messages"].back()["content"]; }
};

TEST_F(Agent, FeedsBackCompileErrorThenMismatchThenStopsOnAPass) {
  FakeLlmServer s({Reply::code("// BROKEN\n"), Reply::code("// WRONG\n"), Reply::code("// SPEED=1.5\n")});
  AgentResult r = run(s, 5);
  EXPECT_EQ(r.steps_run, 3);
  EXPECT_EQ(r.stop_reason, "target reached");
  EXPECT_EQ(r.best_step, 3);
  EXPECT_EQ(r.best_speedup, 1.5);
  ASSERT_EQ(evaluator.seen.size(), 3u);
  EXPECT_EQ(evaluator.seen[0], dir / "step_1.cu");

  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].json()["messages"].size(), 2u);  // system + the prompt
  EXPECT_EQ(last_user(reqs[0]), "FIRST PROMPT");
  // Step 2 sees the whole conversation: prompt, reply 1, the compiler's complaint.
  EXPECT_EQ(reqs[1].json()["messages"].size(), 4u);
  EXPECT_NE(reqs[1].json()["messages"][2]["content"].get<std::string>().find("BROKEN"), std::string::npos);
  EXPECT_NE(last_user(reqs[1]).find("did not compile"), std::string::npos) << last_user(reqs[1]);
  EXPECT_NE(last_user(reqs[1]).find("\"undefined_thing\" is undefined"), std::string::npos);
  EXPECT_NE(last_user(reqs[1]).find("4 attempt(s) left"), std::string::npos);
  EXPECT_NE(last_user(reqs[2]).find("wrong outputs"), std::string::npos) << last_user(reqs[2]);
  EXPECT_NE(last_user(reqs[2]).find("first mismatch at index 0: got 2, expected 1"), std::string::npos);

  json t = transcript();
  EXPECT_EQ(t["stop_reason"], "target reached");
  EXPECT_EQ(t["system"], "SYSTEM");
  ASSERT_EQ(t["steps"].size(), 3u);
  EXPECT_EQ(t["steps"][0]["prompt"], "FIRST PROMPT");
  EXPECT_EQ(t["steps"][0]["candidate"], "step_1.cu");
  EXPECT_EQ(t["steps"][0]["record"]["status"], "compile_error");
  EXPECT_EQ(t["steps"][1]["prompt"], t["steps"][0]["feedback"]);
  EXPECT_EQ(t["steps"][1]["record"]["status"], "mismatch");
  EXPECT_EQ(t["steps"][2]["record"]["status"], "ok");
  EXPECT_FALSE(t["steps"][2].contains("feedback")) << "nothing is sent after the last step";
  EXPECT_EQ(t["best"]["step"], 3);
  EXPECT_EQ(t["best"]["candidate"], "step_3.cu");
  EXPECT_EQ(read_file(dir / "best.cu"), read_file(dir / "step_3.cu"));
  EXPECT_EQ(read_file(dir / "step_3.cu").rfind("// pkb-generated: openai/fake, problem 1_allreduce, agent step 3\n#line 1\n", 0),
            0u);
  EXPECT_FALSE(lines.empty());
}

TEST_F(Agent, KeepsTheFastestPassAndStopsAtTheStepLimit) {
  FakeLlmServer s({Reply::code("// SPEED=0.8\n"), Reply::code("// SPEED=0.9\n"), Reply::code("// SPEED=0.7\n")});
  AgentResult r = run(s, 3);
  EXPECT_EQ(r.stop_reason, "step limit");
  EXPECT_EQ(r.best_step, 2);
  EXPECT_EQ(r.best_speedup, 0.9);
  EXPECT_EQ(read_file(dir / "best.cu"), read_file(dir / "step_2.cu"));
  std::string fb = last_user(s.requests().at(1));
  EXPECT_NE(fb.find("Speedup over the baseline: 0.80x"), std::string::npos) << fb;
  EXPECT_NE(fb.find("baseline median 30.0 us"), std::string::npos) << fb;
  EXPECT_NE(fb.find("42% of the roofline, floor 7.9 us, link-bound"), std::string::npos) << fb;
  EXPECT_NE(fb.find("at least 1.00x"), std::string::npos) << fb;
  EXPECT_EQ(transcript()["best"]["step"], 2);
}

TEST_F(Agent, NoCodeBlockIsFedBackWithoutEvaluating) {
  FakeLlmServer s({Reply::answer("Let me think about it first."), Reply::code("// SPEED=2\n")});
  AgentResult r = run(s, 3);
  EXPECT_EQ(r.steps_run, 2);
  EXPECT_EQ(evaluator.seen.size(), 1u);
  EXPECT_NE(last_user(s.requests().at(1)).find("no ```cu code block"), std::string::npos);
  json t = transcript();
  EXPECT_EQ(t["steps"][0]["llm"]["status"], "no_code_block");
  EXPECT_FALSE(t["steps"][0].contains("candidate"));
  EXPECT_FALSE(fs::exists(dir / "step_1.cu"));
}

TEST_F(Agent, CrashFeedbackNamesTheRankAndItsOutput) {
  FakeLlmServer s({Reply::code("// CRASH\n"), Reply::code("// SPEED=1.2\n")});
  run(s, 2);
  std::string fb = last_user(s.requests().at(1));
  EXPECT_NE(fb.find("status crash"), std::string::npos) << fb;
  EXPECT_NE(fb.find("Rank 1, phase 'trial 0'"), std::string::npos) << fb;
  EXPECT_NE(fb.find("the segfault happened here"), std::string::npos) << fb;
}

TEST_F(Agent, ModelFailureOrHarnessErrorStopsTheLoop) {
  {
    FakeLlmServer s({Reply::error(400, R"({"error":{"message":"prompt too long"}})")});
    AgentResult r = run(s, 3);
    EXPECT_EQ(r.steps_run, 1);
    EXPECT_EQ(r.best_step, 0);
    EXPECT_NE(r.stop_reason.find("model: http_error"), std::string::npos) << r.stop_reason;
    EXPECT_NE(r.stop_reason.find("prompt too long"), std::string::npos) << r.stop_reason;
    EXPECT_TRUE(transcript()["best"].is_null());
    EXPECT_FALSE(fs::exists(dir / "best.cu"));
  }
  {
    FakeLlmServer s({Reply::code("// HARNESS\n"), Reply::code("// SPEED=3\n")});
    AgentResult r = run(s, 3);
    EXPECT_EQ(r.steps_run, 1);
    EXPECT_EQ(r.stop_reason, "harness_error: the baseline failed: NCCL error");
  }
}

TEST_F(Agent, AHarnessExceptionKeepsTheTranscriptAndGoesUp) {
  class Throwing final : public CandidateEvaluator {
   public:
    EvalRecord evaluate(const fs::path&) override { throw Error(Errc::invalid_argument, "no such size"); }
  } throwing;
  FakeLlmServer s({Reply::code("// SPEED=2\n")});
  LlmConfig cfg;
  cfg.model = "fake";
  cfg.base_url = s.url("/v1");
  AgentOptions o;
  o.dir = dir;
  o.steps = 2;
  EXPECT_THROW(run_agent(*make_chat_model(cfg), throwing, prompt, templates, o), Error);
  json t = transcript();
  EXPECT_EQ(t["stop_reason"], "error at step 1: no such size");
}

TEST_F(Agent, ANewRunReplacesStaleOutputs) {
  fs::create_directories(dir);
  write_file_atomic(dir / "best.cu", "stale best");
  write_file_atomic(dir / "step_7.cu", "stale step");
  FakeLlmServer s({Reply::code("// WRONG\n")});
  run(s, 1);
  EXPECT_FALSE(fs::exists(dir / "best.cu"));
  EXPECT_FALSE(fs::exists(dir / "step_7.cu"));
  EXPECT_TRUE(fs::exists(dir / "step_1.cu"));
}

TEST(Feedback, LongCompilerLogsAreCutAtTheirHead) {
  PromptTemplates t = load_templates(pkb_home() / "prompts" / "prompts.toml");
  EvalRecord r;
  r.status = Status::compile_error;
  for (int i = 0; i < 500; ++i) r.compile_log += "x.cu(" + std::to_string(i) + "): error: something\n";
  std::string fb = feedback_message(t, r, 2, 1.0);
  EXPECT_NE(fb.find("x.cu(0): error"), std::string::npos);
  EXPECT_EQ(fb.find("x.cu(499): error"), std::string::npos);
  EXPECT_NE(fb.find("more bytes]"), std::string::npos);
  EXPECT_LT(fb.size(), 8000u);
  EXPECT_NE(fb.find("2 attempt(s) left"), std::string::npos);
}

TEST(Feedback, EveryTemplateMayUseEveryDocumentedPlaceholder) {
  std::string toml = read_file(pkb_home() / "prompts" / "prompts.toml");
  const std::string all =
      "{status}{message}{details}{steps_left}{target_speedup}{speedup}{baseline_us}{candidate_us}{roofline}{profile}";
  for (FeedbackKind k : kAllFeedbackKinds) {
    PromptTemplates t = parse_templates(toml, "prompts.toml");
    t.feedback[k] = all;
    EvalRecord r;
    r.status = k == FeedbackKind::passed ? Status::ok : Status::crash;
    EXPECT_NO_THROW(feedback_message(t, r, 1, 1.0)) << to_string(k);
    EXPECT_NO_THROW(no_code_feedback(t, 1, 1.0)) << to_string(k);
  }
}

TEST(Feedback, TheCandidatesProfileSummaryGoesIntoTheNextPrompt) {
  PromptTemplates t = load_templates(pkb_home() / "prompts" / "prompts.toml");
  EvalRecord r;
  r.status = Status::ok;
  EXPECT_EQ(feedback_message(t, r, 1, 1.0).find("Profile of your solution"), std::string::npos);  // no --profile
  std::string text = "candidate: 5 profiled calls, median 0.0412 ms (slowest rank per call)\n";
  r.profile = {{"sides",
                {{{"label", "baseline"}, {"collected", true}, {"text", "baseline: 5 profiled calls\n"}},
                 {{"label", "candidate"}, {"collected", true}, {"text", text}}}}};
  std::string fb = feedback_message(t, r, 1, 1.0);
  EXPECT_NE(fb.find("Profile of your solution"), std::string::npos) << fb;
  EXPECT_NE(fb.find(text), std::string::npos) << fb;
  EXPECT_EQ(fb.find("baseline: 5 profiled calls"), std::string::npos) << fb;  // only the candidate's
  r.profile["sides"][1] = {{"label", "candidate"}, {"collected", false}, {"reason", "CUPTI ..."}};
  EXPECT_EQ(feedback_message(t, r, 1, 1.0).find("Profile of your solution"), std::string::npos);
}

TEST(Feedback, EveryStatusHasAMessage) {
  PromptTemplates t = load_templates(pkb_home() / "prompts" / "prompts.toml");
  for (Status s : {Status::ok, Status::compile_error, Status::load_error, Status::runtime_error, Status::mismatch, Status::crash,
                   Status::timeout, Status::flagged}) {
    EvalRecord r;
    r.status = s;
    r.message = "MESSAGE-" + std::string(to_string(s));
    std::string fb = feedback_message(t, r, 1, 1.5);
    EXPECT_FALSE(fb.empty()) << to_string(s);
    if (s != Status::ok && s != Status::compile_error && s != Status::mismatch)
      EXPECT_NE(fb.find(r.message), std::string::npos) << to_string(s) << ": " << fb;
  }
}

}  // namespace
}  // namespace pkb
