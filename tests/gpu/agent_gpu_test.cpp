// GPU proof of the agent loop: the fake endpoint in this process answers with a candidate that does
// not compile, then a wrong one (solutions/adversarial/wrong_values.cu), then the one-shot example
// (solutions/examples/1_allreduce_oneshot.cu). The real `pkb agent` evaluates each on 2 GPUs,
// feeds the compiler error and the mismatch back, and must end with the example as its best.
// On one GPU the two ranks share it (--oversubscribe), where the example, which needs symmetric
// memory, would be unsupported: the NCCL-only honest control takes its place. Skips (exit 77)
// where no GPU is visible.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/files.hpp"
#include "eval/system.hpp"
#include "fake_llm.hpp"
#include "proc/process.hpp"

namespace pkb {
namespace {

using fake::FakeLlmServer;
using fake::Reply;
using nlohmann::json;

int visible_gpus() {
  static int n = probe_system().gpu_count;
  return n;
}

std::string last_user(const fake::Request& r) { return r.json()["messages"].back()["content"]; }

TEST(AgentGpu, CompileErrorThenMismatchThenThePassingExample) {
  if (visible_gpus() < 1) GTEST_SKIP() << "needs a GPU";
  const bool shared = visible_gpus() < 2;
  fs::path src(PKB_TEST_SOURCE_DIR);
  std::string broken =
      "#include <pkb/solution.h>\n"
      "extern \"C\" int pkb_init(pkb_context*) { return undefined_thing; }\n"
      "extern \"C\" int pkb_run(pkb_context*, const pkb_tensor*, int, pkb_tensor*, int) { return 0; }\n"
      "extern \"C\" int pkb_finalize(pkb_context*) { return 0; }\n";
  std::string wrong = read_file(src / "solutions" / "adversarial" / "wrong_values.cu");
  std::string good = read_file(shared ? src / "solutions" / "adversarial" / "honest_control.cu"
                                      : src / "solutions" / "examples" / "1_allreduce_oneshot.cu");
  FakeLlmServer s({Reply::code(broken), Reply::code(wrong), Reply::code(good)}, {0, 900});
  fs::path out = fs::temp_directory_path() / ("pkb_agent_gpu_" + std::to_string(getpid()));
  fs::remove_all(out);

  SpawnOptions o;
  o.argv = {std::string(PKB_TEST_BINARY_DIR) + "/bin/pkb",
            "agent",
            "1",
            "--provider",
            "openai",
            "--base-url",
            s.url("/v1"),
            "--model",
            "fake",
            "--steps",
            "3",
            "--gpus",
            "2",
            "--size",
            "small",
            "--out-dir",
            out.string(),
            "--run-name",
            "gpu_test",
            "--trials",
            "2",
            "--warmup",
            "20",
            "--iters",
            "30"};
  if (shared) o.argv.push_back("--oversubscribe");
  auto r = run_command(o, std::chrono::minutes(10));
  std::cout << r.out << r.err << std::flush;
  ASSERT_TRUE(r.exit.exited) << r.exit.describe();
  EXPECT_EQ(r.exit.code, 0) << "a passing candidate was found";

  fs::path dir = out / "gpu_test" / "agent" / "1_allreduce";
  json t = json::parse(read_file(dir / "transcript.json"));
  ASSERT_EQ(t["steps"].size(), 3u) << t.dump(2).substr(0, 4000);
  EXPECT_EQ(t["steps"][0]["record"]["status"], "compile_error");
  EXPECT_EQ(t["steps"][1]["record"]["status"], "mismatch");
  EXPECT_EQ(t["steps"][2]["record"]["status"], "ok") << t["steps"][2]["record"].value("message", "");
  EXPECT_EQ(t["best"]["step"], 3);
  EXPECT_TRUE(t["stop_reason"] == "target reached" || t["stop_reason"] == "step limit") << t["stop_reason"];
  EXPECT_EQ(read_file(dir / "best.cu"), read_file(dir / "step_3.cu"));
  EXPECT_NE(read_file(dir / "best.cu").find(good), std::string::npos);

  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_NE(last_user(reqs[1]).find("did not compile"), std::string::npos) << last_user(reqs[1]);
  EXPECT_NE(last_user(reqs[1]).find("undefined_thing"), std::string::npos) << "nvcc's message reaches the model";
  EXPECT_NE(last_user(reqs[2]).find("wrong outputs"), std::string::npos) << last_user(reqs[2]);
  fs::remove_all(out);
}

}  // namespace
}  // namespace pkb

// Exit 77 (CTest's skip code) when there is nothing to test here.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  if (rc == 0 && pkb::visible_gpus() < 1) return 77;
  return rc;
}
