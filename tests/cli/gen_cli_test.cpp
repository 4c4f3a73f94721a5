// The generation commands end to end through the real `pkb` binary, against the fake endpoint in
// this process (127.0.0.1 only): prompt output, generate's files and resumption, its exit codes,
// Ctrl-C, and agent's refusal to start where its candidates cannot be evaluated.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "fake_llm.hpp"
#include "pkb_cli.hpp"

namespace pkb {
namespace {

using fake::FakeLlmServer;
using fake::Reply;
using nlohmann::json;

using testing::PkbResult;

PkbResult pkb(const std::vector<std::string>& args, const fs::path& cwd) {
  return testing::run_pkb(args, cwd, {{"PKB_LLM_TEST_KEY", "sk-cli"}});
}

class GenCli : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("pkb_gen_cli_" + std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> model_args(const FakeLlmServer& s) {
    return {"--model", "fake", "--base-url", s.url("/v1"), "--api-key-env", "PKB_LLM_TEST_KEY", "--retries", "0"};
  }
};

TEST_F(GenCli, PromptPrintsOrWritesTheRenderedPrompt) {
  PkbResult printed = pkb({"prompt", "2", "--print", "--gpus", "2", "--size", "small"}, dir);
  ASSERT_EQ(printed.rc, 0) << printed.err;
  EXPECT_NE(printed.out.find("===== system ====="), std::string::npos);
  EXPECT_NE(printed.out.find("# Task: 2_allgather"), std::string::npos);
  EXPECT_NE(printed.out.find("World size W = 2"), std::string::npos);
  EXPECT_NE(printed.out.find("bf16[2, 256, 512]"), std::string::npos) << "the small size's output, W x M x N";
  PkbResult written = pkb({"prompt", "allgather", "--gpus", "2", "--size", "small", "--out", "p.md"}, dir);
  ASSERT_EQ(written.rc, 0) << written.err;
  EXPECT_TRUE(written.out.empty());
  EXPECT_EQ(read_file(dir / "p.md"), printed.out);
  EXPECT_NE(written.err.find("written to p.md"), std::string::npos) << written.err;
}

TEST_F(GenCli, PromptRejectsBadInputWithExitCode2) {
  PkbResult unknown = pkb({"prompt", "allreduse"}, dir);
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.err.find("allreduce"), std::string::npos) << unknown.err;
  PkbResult templates = pkb({"prompt", "1", "--templates", "missing.toml"}, dir);
  EXPECT_EQ(templates.rc, 2);
  EXPECT_NE(templates.err.find("missing.toml"), std::string::npos) << templates.err;
  PkbResult world = pkb({"prompt", "1", "--gpus", "64"}, dir);
  EXPECT_EQ(world.rc, 2);
  EXPECT_NE(world.err.find("not 64"), std::string::npos) << world.err;
}

TEST_F(GenCli, GenerateWritesTheRunAndResumes) {
  FakeLlmServer s({Reply::code("extern \"C\" int pkb_run();\n")});
  auto args = model_args(s);
  args.insert(args.begin(), {"generate", "1", "2_allgather", "--samples", "2", "--gpus", "2", "-j", "3"});
  PkbResult first = pkb(args, dir);
  ASSERT_EQ(first.rc, 0) << first.err;
  EXPECT_NE(first.out.find("4/4 done: 4 ok"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("pkb eval --solutions solutions/openai_fake --gpus 2\n"), std::string::npos) << first.out;
  fs::path run = dir / "solutions" / "openai_fake";
  for (auto name : {"1_allreduce_s0", "1_allreduce_s1", "2_allgather_s0", "2_allgather_s1"}) {
    EXPECT_TRUE(fs::exists(run / (std::string(name) + ".cu"))) << name;
    EXPECT_EQ(json::parse(read_file(run / (std::string(name) + ".json")))["status"], "ok") << name;
  }
  EXPECT_TRUE(fs::exists(run / "prompts" / "2_allgather.md"));
  json config = json::parse(read_file(run / "2_allgather_s1.json"))["prompt_config"];
  EXPECT_EQ(config["world"], 2);
  EXPECT_EQ(config["size"], "default");
  EXPECT_EQ(config["dtype"], "bf16");
  EXPECT_EQ(config["backend"], "cuda");
  EXPECT_EQ(s.requests().size(), 4u);
  EXPECT_EQ(s.requests()[0].headers.at("authorization"), "Bearer sk-cli");

  PkbResult again = pkb(args, dir);
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("4 kept"), std::string::npos) << again.out;
  EXPECT_EQ(s.requests().size(), 4u) << "nothing asked twice";
}

TEST_F(GenCli, GenerateFailuresExitWith1AndAreRecorded) {
  FakeLlmServer s({Reply::answer("unused")});
  PkbResult r = pkb({"generate", "1", "--model", "fake", "--base-url", s.url("/v1"), "--api-key-env", "PKB_UNSET_TEST_KEY",
                     "--run-name", "nokey"},
                    dir);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("1 failed"), std::string::npos) << r.out;
  json rec = json::parse(read_file(dir / "solutions" / "nokey" / "1_allreduce_s0.json"));
  EXPECT_EQ(rec["status"], "auth_missing");
  EXPECT_NE(rec["message"].get<std::string>().find("PKB_UNSET_TEST_KEY"), std::string::npos);
  EXPECT_TRUE(s.requests().empty());
}

TEST_F(GenCli, CtrlCStopsGenerateWithExitCode130AndNoHalfFiles) {
  Reply slow = Reply::code("int late;\n");
  slow.delay_ms = 20000;
  FakeLlmServer s({slow});
  SpawnOptions o;
  o.argv = {std::string(PKB_TEST_BINARY_DIR) + "/bin/pkb", "generate", "1", "2", "--samples", "2", "-j", "2"};
  for (auto& a : model_args(s)) o.argv.push_back(a);
  o.cwd = dir;
  o.env_set = {{"PKB_LLM_TEST_KEY", "sk-cli"}};
  o.capture_output = true;
  Spawned child = spawn(o);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.requests().size() < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(s.requests().size(), 2u) << "both workers are waiting for the slow endpoint";
  auto t0 = std::chrono::steady_clock::now();
  ::kill(child.pid, SIGINT);
  auto exit = reap_until(child.pid, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  if (child.out_fd >= 0) ::close(child.out_fd);
  if (child.err_fd >= 0) ::close(child.err_fd);
  ASSERT_TRUE(exit) << "pkb did not stop on SIGINT";
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 130);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  fs::path run = dir / "solutions" / "openai_fake";
  for (auto& e : fs::directory_iterator(run)) {
    std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "prompts" || name == "run.json") << "unexpected file after Ctrl-C: " << name;
  }
}

TEST_F(GenCli, AgentRefusesToStartWithoutTheGpusToEvaluateOn) {
  FakeLlmServer s({Reply::code("int x;\n")});
  auto args = model_args(s);
  args.insert(args.begin(), {"agent", "1", "--gpus", "4", "--steps", "2", "--out-dir", "out"});
  // GPUs hidden, so that the refusal is the same on a GPU node as on a laptop.
  PkbResult r = testing::run_pkb(args, dir, {{"PKB_LLM_TEST_KEY", "sk-cli"}, {"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("pkb agent evaluates every step on 4 GPUs, but none is visible here"), std::string::npos) << r.err;
  EXPECT_TRUE(s.requests().empty()) << "no request is paid for before the check";
}

TEST_F(GenCli, AgentNamesAWorldSizeTheProblemCannotRunAt) {
  FakeLlmServer s({Reply::code("int x;\n")});
  auto args = model_args(s);
  args.insert(args.begin(), {"agent", "1", "--gpus", "64", "--steps", "2", "--out-dir", "out"});
  PkbResult r = pkb(args, dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("1_allreduce runs on 2 to 8 GPUs, not 64"), std::string::npos) << r.err;
  EXPECT_TRUE(s.requests().empty()) << "no request is paid for before the check";
}

}  // namespace
}  // namespace pkb
