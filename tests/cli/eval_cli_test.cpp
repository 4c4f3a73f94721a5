// `pkb run`, `eval` and `sweep` through the real binary: input that is wrong whatever the machine
// (an unknown size class, dtype or world size) is named as such before any GPU is looked for, so
// that the message is the same on a laptop and on a GPU node, and nothing is launched.
#include <gtest/gtest.h>
#include <unistd.h>

#include "pkb_cli.hpp"

namespace pkb {
namespace {

class EvalCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("pkb_eval_cli_" + std::to_string(getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  /// Runs pkb and expects a failure whose stderr names `what`, and no mention of GPUs.
  void expect_rejected(const std::vector<std::string>& args, const std::string& what) {
    auto r = testing::run_pkb(args, dir);
    std::string cmd;
    for (auto& a : args) cmd += a + " ";
    EXPECT_NE(r.rc, 0) << cmd;
    EXPECT_NE(r.err.find(what), std::string::npos) << cmd << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find("GPU is visible"), std::string::npos) << cmd << ": checked the GPUs first\n" << r.err;
  }
};

TEST_F(EvalCli, UnknownSizeClassIsNamedWithTheChoices) {
  expect_rejected({"run", "12", "--size", "huge"}, "12_allgather_gemm has no size class 'huge' (sizes: tiny, small, default, large)");
  expect_rejected({"eval", "12", "--solution", "reference", "--size", "huge"}, "no size class 'huge'");
}

TEST_F(EvalCli, SweepChecksEveryClassItIsGiven) {
  expect_rejected({"sweep", "16", "--solution", "reference", "--classes", "tiny", "--classes", "medium"},
                  "16_gemm_reducescatter has no size class 'medium'");
}

TEST_F(EvalCli, UnsupportedDtypeAndWorldSizeAreNamed) {
  expect_rejected({"eval", "12", "--solution", "reference", "--dtype", "fp64"},
                  "12_allgather_gemm does not support dtype fp64 (supported: bf16, fp16, fp32)");
  expect_rejected({"run", "1", "--gpus", "9"}, "runs on 2 to 8 GPUs, not 9");
  expect_rejected({"eval", "1", "--solution", "reference", "--dtype", "fp99"},
                  "unknown dtype 'fp99' (bf16, fp16, fp32, fp64, int8, uint8, int32, int64, bool, fp8_e4m3)");
}

}  // namespace
}  // namespace pkb
