// `pkb generate`'s engine against the fake endpoint: the file layout shared with
// `pkb eval --solutions`, the sample records, statuses and resumability.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "core/files.hpp"
#include "core/hash.hpp"
#include "fake_llm.hpp"
#include "gen/generate.hpp"

namespace pkb {
namespace {

using fake::FakeLlmServer;
using fake::Reply;
using nlohmann::json;

class Generate : public ::testing::Test {
 protected:
  fs::path dir;
  std::vector<ProblemPrompt> problems{{"1_alpha", {"system text", "USER PROMPT FOR 1_alpha"}, {{"world", 4}}},
                                      {"2_beta", {"system text", "USER PROMPT FOR 2_beta"}, {{"world", 2}}}};
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("pkb_gen_test_" + std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name()) /
          "fake_run";
    fs::remove_all(dir.parent_path());
  }
  void TearDown() override { fs::remove_all(dir.parent_path()); }

  GenerateOptions options(const FakeLlmServer& s, int samples, int concurrency) {
    GenerateOptions o;
    o.run_dir = dir;
    o.run_name = "fake_run";
    o.samples = samples;
    o.concurrency = concurrency;
    o.llm.provider = Provider::openai;
    o.llm.model = "fake-model";
    o.llm.base_url = s.url("/v1");
    o.llm.max_retries = 0;
    o.llm.timeout_s = 10;
    return o;
  }
  GenerateSummary run(const GenerateOptions& o) {
    return run_generate(
        problems, o, [&] { return make_chat_model(o.llm); }, nullptr);
  }
  json record(const std::string& name) { return json::parse(read_file(dir / (name + ".json"))); }
};

/// Answers with code that names the problem found in the prompt, so files can be matched to prompts.
Reply code_for(const fake::Request& req) {
  std::string user = req.json()["messages"][1]["content"];
  return Reply::code("// solution for: " + user + "\nextern \"C\" int pkb_run();\n", "- my strategy");
}

TEST_F(Generate, WritesCodeAndARecordPerSampleUnderSharedNames) {
  FakeLlmServer s([](const fake::Request& r, int) { return code_for(r); }, {});
  GenerateSummary sum = run(options(s, 2, 3));
  EXPECT_EQ(sum.total, 4);
  EXPECT_EQ(sum.ok, 4);
  EXPECT_EQ(sum.line(), "4/4 done: 4 ok, 0 no code, 0 failed, 0 kept");
  EXPECT_EQ(s.requests().size(), 4u);
  std::set<std::string> files;
  for (auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"1_alpha_s0.cu", "1_alpha_s0.json", "1_alpha_s1.cu", "1_alpha_s1.json", "2_beta_s0.cu",
                                          "2_beta_s0.json", "2_beta_s1.cu", "2_beta_s1.json", "prompts", "run.json"}));
  for (auto& p : problems) {
    EXPECT_EQ(read_file(dir / "prompts" / (p.stem + ".md")), p.prompt.to_text());
    for (int k = 0; k < 2; ++k) {
      std::string name = sample_name(p.stem, k);
      std::string code = "// solution for: USER PROMPT FOR " + p.stem + "\nextern \"C\" int pkb_run();\n";
      std::string file = read_file(dir / (name + ".cu"));
      EXPECT_EQ(file.rfind("// pkb-generated: openai/fake-model, problem " + p.stem, 0), 0u) << file;
      EXPECT_NE(file.find("\n#line 1\n" + code), std::string::npos) << file;
      json r = record(name);
      EXPECT_EQ(r["status"], "ok");
      EXPECT_EQ(r["problem"], p.stem);
      EXPECT_EQ(r["sample"], k);
      EXPECT_EQ(r["model"], "fake-model");
      EXPECT_EQ(r["provider"], "openai");
      EXPECT_EQ(r["prompt_sha256"], p.prompt.sha256());
      EXPECT_EQ(r["prompt_config"], p.config);
      EXPECT_EQ(r["code_path"], name + ".cu");
      EXPECT_EQ(r["code_sha256"], sha256_hex(code));
      EXPECT_EQ(r["file_sha256"], sha256_hex(file));
      EXPECT_EQ(r["strategy"], "- my strategy");
      EXPECT_EQ(r["parameters"]["max_tokens"], 32768);
      EXPECT_GT(r["usage"]["completion_tokens"].get<int>(), 0);
      EXPECT_NE(r["reply"].get<std::string>().find("```cu"), std::string::npos);
    }
  }
  json run_rec = json::parse(read_file(dir / "run.json"));
  EXPECT_EQ(run_rec["samples"], 2);
  EXPECT_EQ(run_rec["problems"], (json{"1_alpha", "2_beta"}));
  EXPECT_EQ(run_rec["prompt_configs"]["2_beta"]["world"], 2);
}

TEST_F(Generate, FailuresAreRecordedAndRetriedOnTheNextRunOnly) {
  // First run: 1_alpha gets code, 2_beta a server error for s0 and no code block for s1.
  auto beta = std::make_shared<std::atomic<int>>(0);
  FakeLlmServer first(
      [beta](const fake::Request& r, int) {
        std::string user = r.json()["messages"][1]["content"];
        if (user.find("2_beta") == std::string::npos) return code_for(r);
        return (*beta)++ == 0 ? Reply::error(500, R"({"error":{"message":"boom"}})") : Reply::answer("I would rather explain.");
      },
      {});
  GenerateOptions o = options(first, 2, 1);  // one at a time: s0 is asked before s1
  GenerateSummary a = run(o);
  EXPECT_EQ(a.ok, 2);
  EXPECT_EQ(a.failed, 1);
  EXPECT_EQ(a.no_code, 1);
  json failed = record("2_beta_s0"), nocode = record("2_beta_s1");
  EXPECT_EQ(failed["status"], "http_error");
  EXPECT_NE(failed["message"].get<std::string>().find("boom"), std::string::npos);
  EXPECT_EQ(failed["http_code"], 500);
  EXPECT_EQ(nocode["status"], "no_code_block");
  EXPECT_EQ(nocode["strategy"], "I would rather explain.");
  EXPECT_FALSE(fs::exists(dir / "2_beta_s0.cu"));
  EXPECT_FALSE(fs::exists(dir / "2_beta_s1.cu"));
  EXPECT_TRUE(sample_is_final(dir, "1_alpha", 0));
  EXPECT_FALSE(sample_is_final(dir, "2_beta", 0));
  EXPECT_TRUE(sample_is_final(dir, "2_beta", 1)) << "no code block is the model's final answer";

  // Second run: only the failed sample, and one whose code file went missing, are asked again.
  fs::remove(dir / "1_alpha_s1.cu");
  FakeLlmServer second([](const fake::Request& r, int) { return code_for(r); }, {});
  o.llm.base_url = second.url("/v1");
  GenerateSummary b = run(o);
  EXPECT_EQ(b.kept, 2);
  EXPECT_EQ(b.ok, 2);
  auto reqs = second.requests();
  ASSERT_EQ(reqs.size(), 2u);
  std::set<std::string> asked;
  for (auto& r : reqs) asked.insert(r.json()["messages"][1]["content"].get<std::string>());
  EXPECT_EQ(asked, (std::set<std::string>{"USER PROMPT FOR 1_alpha", "USER PROMPT FOR 2_beta"}));
  EXPECT_EQ(record("2_beta_s0")["status"], "ok");
  EXPECT_TRUE(fs::exists(dir / "1_alpha_s1.cu"));
  EXPECT_EQ(record("2_beta_s1")["status"], "no_code_block") << "final records are kept as they were";

  // Third run: everything is final; nothing is sent.
  FakeLlmServer third({Reply::answer("unused")});
  o.llm.base_url = third.url("/v1");
  GenerateSummary c = run(o);
  EXPECT_EQ(c.kept, 4);
  EXPECT_TRUE(third.requests().empty());
}

TEST_F(Generate, ARegeneratedSampleWithoutCodeRemovesTheOldFile) {
  fs::create_directories(dir);
  write_file_atomic(dir / "1_alpha_s0.cu", "stale code");  // no record: not final
  problems.resize(1);
  FakeLlmServer s({Reply::answer("no code this time")});
  run(options(s, 1, 1));
  EXPECT_EQ(record("1_alpha_s0")["status"], "no_code_block");
  EXPECT_FALSE(fs::exists(dir / "1_alpha_s0.cu"));
}

TEST_F(Generate, EveryTransportFailureHasItsStatus) {
  problems.resize(1);
  struct Case {
    Reply reply;
    std::string status;
  };
  Reply slow = Reply::answer("late");
  slow.delay_ms = 2000;
  std::vector<Case> cases{{Reply::error(400, R"({"error":{"message":"bad request"}})"), "http_error"},
                          {Reply::error(429, "{}", {{"Retry-After", "0"}}), "rate_limited"},
                          {Reply::raw("not json"), "malformed_response"},
                          {slow, "timeout"}};
  for (auto& c : cases) {
    FakeLlmServer s({c.reply});
    GenerateOptions o = options(s, 1, 1);
    o.llm.timeout_s = 0.5;
    fs::remove_all(dir);
    run(o);
    EXPECT_EQ(record("1_alpha_s0")["status"], c.status);
    EXPECT_FALSE(record("1_alpha_s0")["message"].get<std::string>().empty());
    EXPECT_FALSE(fs::exists(dir / "1_alpha_s0.cu"));
  }
}

}  // namespace
}  // namespace pkb
