// `pkb run`, `eval` and `sweep` through the real binary: input that is wrong whatever the machine
// (an unknown size class, dtype or world size, a count below 1, a negative tolerance, a path that
// is not a file, a `--full` request at odds with its flags or the spec) is named as such before any
// GPU is looked for, so that the message is the same on a laptop and on a GPU node, and nothing is
// launched. Also the CLI's exit codes for argument
// errors, `pkb list`'s columns and the message where no GPU or driver is found.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "pkb_cli.hpp"

namespace pkb {
namespace {

class EvalCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("pkb_eval_cli_" + std::to_string(getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  /// Runs pkb and expects bad input (exit 2) whose stderr names `what`, and no mention of GPUs.
  void expect_rejected(const std::vector<std::string>& args, const std::string& what,
                       std::vector<std::pair<std::string, std::string>> env = {}) {
    auto r = testing::run_pkb(args, dir, std::move(env));
    std::string cmd;
    for (auto& a : args) cmd += a + " ";
    EXPECT_EQ(r.rc, 2) << cmd << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << cmd << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find("GPU is visible"), std::string::npos) << cmd << ": checked the GPUs first\n" << r.err;
  }
};

TEST_F(EvalCli, UnknownSizeClassIsNamedWithTheChoices) {
  expect_rejected({"run", "12", "--size", "huge"},
                  "12_allgather_gemm has no size class 'huge' (sizes: tiny, small, default, large)");
  expect_rejected({"eval", "12", "--solution", "reference", "--size", "huge"}, "no size class 'huge'");
}

TEST_F(EvalCli, UnknownSizeVariableIsNamedWithTheChoicesBeforeTheGpus) {
  expect_rejected({"run", "1", "--set", "Q=3"}, "1_allreduce has no size variable 'Q' (its size variables: M, N)");
  expect_rejected({"eval", "12", "--solution", "reference", "--size", "tiny", "--set", "Q=3"},
                  "12_allgather_gemm has no size variable 'Q'");
  expect_rejected({"run", "12", "--set", "W=4"}, "W is the number of ranks: set it with --gpus");
  expect_rejected({"run", "12", "--set", "K=0"}, "K must be positive, not 0");
}

TEST_F(EvalCli, SweepChecksEveryClassItIsGiven) {
  expect_rejected({"sweep", "16", "--solution", "reference", "--classes", "tiny", "--classes", "medium"},
                  "16_gemm_reducescatter has no size class 'medium'");
  // A sweep by bytes: its --var must be a variable of the size class, checked before any GPU.
  expect_rejected({"sweep", "1", "--solution", "reference", "--var", "Q"}, "1_allreduce has no size variable 'Q'");
  expect_rejected({"sweep", "12", "--solution", "reference", "--var", "W"}, "W is the number of ranks");
}

TEST_F(EvalCli, UnsupportedDtypeAndWorldSizeAreNamed) {
  expect_rejected({"eval", "12", "--solution", "reference", "--dtype", "fp64"},
                  "12_allgather_gemm does not support dtype fp64 (supported: bf16, fp16, fp32)");
  expect_rejected({"run", "1", "--gpus", "9"}, "runs on 2 to 8 GPUs, not 9");
  expect_rejected({"eval", "1", "--solution", "reference", "--dtype", "fp99"},
                  "unknown dtype 'fp99' (bf16, fp16, fp32, fp64, int8, uint8, int32, int64, bool, fp8_e4m3, fp8_e5m2)");
}

TEST_F(EvalCli, AProfileDirectoryThatCannotBeUsedIsRefusedBeforeTheGpus) {
  std::ofstream(dir / "file") << "x";
  std::string file = (dir / "file").string();
  expect_rejected({"eval", "1", "--solution", "reference", "--profile", file}, "--profile " + file + ": not a directory");
  expect_rejected({"run", "12", "--profile", file + "/sub"}, "cannot create the directory");
  expect_rejected({"sweep", "1", "--solution", "reference", "--profile", file}, "not a directory");
  expect_rejected({"eval", "1", "--solution", "reference", "--profile", (dir / "p").string(), "--interleave", "5"},
                  "--profile does not go with --interleave");
  expect_rejected({"eval", "1", "--solution", "reference", "--full", "--profile", (dir / "p").string()},
                  "--profile profiles one eval: it does not go with --full");
  auto help = testing::run_pkb({"eval", "--help"}, dir);
  EXPECT_NE(help.out.find("--profile DIR"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("https://ui.perfetto.dev"), std::string::npos) << help.out;
}

TEST_F(EvalCli, UnknownLauncherIsNamedFromTheFlagAndFromTheEnvironment) {
  expect_rejected({"run", "1", "--launcher", "slurm"}, "--launcher: must be local or mpi, not 'slurm'");
  expect_rejected({"eval", "1", "--solution", "reference"}, "--launcher: must be local or mpi, not 'slurm'",
                  {{"PKB_LAUNCHER", "slurm"}});
}

TEST_F(EvalCli, ArgumentErrorsExitTwoWithCli11sMessage) {
  expect_rejected({}, "A subcommand is required");
  expect_rejected({"run"}, "problem is required");
  expect_rejected({"run", "1", "--gpus", "abc"}, "Could not convert: --gpus = abc");
  expect_rejected({"list", "extra"}, "The following argument was not expected: extra");
  expect_rejected({"eval", "1", "--no-such-flag"}, "--no-such-flag");
  auto version = testing::run_pkb({"--version"}, dir);
  EXPECT_EQ(version.rc, 0) << version.err;
  EXPECT_NE(version.out.find("record schema"), std::string::npos) << version.out;
  auto help = testing::run_pkb({"--help"}, dir);
  EXPECT_EQ(help.rc, 0) << help.err;
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << help.out;
}

TEST_F(EvalCli, HelpShowsEachOptionsDefaultUnlessItsWordsDo) {
  auto help = testing::run_pkb({"eval", "--help"}, dir);
  EXPECT_EQ(help.rc, 0) << help.err;
  // CLI11 before 2.2 writes a default as "INT=5", later ones as "INT [5]".
  auto shows = [&](const std::string& opt, const std::string& def) {
    return help.out.find(opt + "=" + def) != std::string::npos || help.out.find(opt + " [" + def + "]") != std::string::npos;
  };
  EXPECT_TRUE(shows("--trials INT", "5")) << help.out;
  EXPECT_TRUE(shows("--iters INT", "100")) << help.out;
  EXPECT_TRUE(shows("--timeout FLOAT", "60")) << help.out;
  EXPECT_TRUE(shows("--launcher ENUM:local|mpi", "local")) << help.out;
  // --gpus 0 would read as "zero GPUs": its default is said in words ("all visible").
  EXPECT_FALSE(shows("--gpus INT", "0")) << help.out;
  EXPECT_EQ(help.out.find("[]"), std::string::npos) << help.out;
}

TEST_F(EvalCli, CountsAndTolerancesAreCheckedWhileParsing) {
  std::string gpus = "--gpus: must be at least 1 (leave --gpus out to use every visible GPU), not ";
  expect_rejected({"run", "1", "--gpus", "0"}, gpus + "0");
  expect_rejected({"eval", "1", "--solution", "reference", "-g", "-2"}, gpus + "-2");
  expect_rejected({"run", "1"}, gpus + "0", {{"PKB_GPUS", "0"}});
  for (std::string cmd : {"show", "sweep", "prompt"}) expect_rejected({cmd, "1", "--gpus", "0"}, gpus + "0");
  expect_rejected({"calibrate", "--gpus", "0"}, gpus + "0");
  expect_rejected({"eval", "1", "--solution", "reference", "--atol", "-1"}, "--atol: must be at least 0, not -1");
  expect_rejected({"run", "1", "--rtol", "-0.5"}, "--rtol: must be at least 0, not -0.5");
  expect_rejected({"compare", "a", "b", "--atol", "-1"}, "--atol: must be at least 0");
  expect_rejected({"run", "1", "--iters", "0"}, "--iters: must be at least 1, not 0");
  expect_rejected({"eval", "1", "--solution", "reference", "--trials", "0"}, "--trials: must be at least 1, not 0");
  expect_rejected({"sweep", "1", "--iters", "0"}, "--iters: must be at least 1");
  expect_rejected({"run", "1", "-M", "0"}, "-M: must be at least 1, not 0");
}

TEST_F(EvalCli, BadSolutionPathsAreBadInputOnStderr) {
  fs::create_directories(dir / "sols");
  auto r = testing::run_pkb({"build", "missing.cu", "sols"}, dir);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.out, "") << "nothing is compiled, nothing goes to stdout";
  EXPECT_NE(r.err.find("solution file missing.cu does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("solution file sols is a directory, not a .cu file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("sols does not exist"), std::string::npos) << r.err;
  expect_rejected({"run", "1", "--solution", "sols"}, "solution file sols is a directory");
  expect_rejected({"eval", "1", "--solution", "missing.cu"}, "solution file missing.cu does not exist");
}

TEST_F(EvalCli, ListAlignsItsColumnsAndKeepsNamesWhole) {
  auto r = testing::run_pkb({"list"}, dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  std::vector<size_t> starts;
  for (auto col : {"name", "origin", "parallelism", "pattern", "tier"}) starts.push_back(header.find(col));
  for (size_t i = 0; i < starts.size(); ++i) ASSERT_NE(starts[i], std::string::npos) << header;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" problems in ") != std::string::npos) continue;
    ++rows;
    for (size_t c : starts) {
      ASSERT_LT(c, line.size()) << line;
      EXPECT_EQ(line[c - 1], ' ') << "a column runs into the next at " << c << ":\n" << header << "\n" << line;
      EXPECT_NE(line[c], ' ') << "column not at " << c << ":\n" << header << "\n" << line;
    }
    EXPECT_EQ(line[starts.back()], 'T') << line;
  }
  EXPECT_GT(rows, 40);
  EXPECT_NE(r.out.find(" ulysses_all_gather_into_tensor_primitive "), std::string::npos) << "the longest name is whole";
}

TEST_F(EvalCli, NoGpuSaysSoAndWhatWorksWithoutOne) {
  // Hiding every device gives the same answer on a GPU node as on a machine without a driver.
  auto r = testing::run_pkb({"run", "1"}, dir, {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("no NVIDIA GPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("list, show, prompt, build, report, compare and generate work without one"), std::string::npos) << r.err;
  auto version = testing::run_pkb({"version"}, dir);
  ASSERT_EQ(version.rc, 0) << version.err;
  // A driver that is present but too old keeps CUDA's own words; only a machine without one is checked here.
  if (version.out.find("GPUs visible: 0") == std::string::npos || fs::exists("/proc/driver/nvidia/version")) return;
  EXPECT_EQ(version.out.find("driver version is insufficient"), std::string::npos) << version.out;
  EXPECT_NE(version.out.find("work without one"), std::string::npos) << version.out;
}

TEST_F(EvalCli, FullChecksItsFlagsAndWorldsBeforeTheGpus) {
  std::vector<std::string> full{"eval", "1", "--solution", "reference", "--full"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = full;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_rejected({"eval", "1", "--solution", "reference", "--worlds", "2,4"}, "--worlds goes with --full");
  expect_rejected({"run", "1", "--full"}, "--full");  // eval only
  std::vector<std::vector<std::string>> sizes{{"--size", "tiny"}, {"-M", "64"}, {"-N", "64"}, {"--set", "M=64"}};
  for (auto& size : sizes)
    expect_rejected(with(size), "--full runs every size class: it does not go with --size, -M, -N or --set");
  expect_rejected(full, "--full runs every size class", {{"PKB_SIZE", "tiny"}});
  expect_rejected(with({"--dtype", "fp16"}), "--full runs every dtype the spec allows: it does not go with --dtype");
  expect_rejected(full, "it does not go with --dtype (or PKB_DTYPE)", {{"PKB_DTYPE", "fp32"}});
  expect_rejected({"eval", "--solutions", "solutions/examples", "--full"},
                  "--full evaluates one solution: it does not go with --solutions DIR");
  expect_rejected(with({"--worlds", "2,x"}), "--worlds 2,x: expects world sizes separated by commas, such as 2,4,8");
  expect_rejected(with({"--worlds", "2,,4"}), "'' is not a whole number");
  expect_rejected(with({"--worlds", "1,2"}), "--worlds 1,2: every problem needs W >= 2, not 1");
  expect_rejected(with({"--worlds", "2,4,2"}), "2 is listed twice");
  expect_rejected(with({"--worlds", "2,16"}), "--worlds 2,16: 1_allreduce runs on 2 to 8 GPUs, not 16");
  expect_rejected(with({"--gpus", "3"}), "--gpus 3 (the summary's world size) is not among the world sizes --full runs (2,4,8)");
  expect_rejected(with({"--worlds", "2,4", "--gpus", "8"}), "--gpus 8 (the summary's world size) is not among");
  expect_rejected({"eval", "1", "--solution", "missing.cu", "--full"}, "solution file missing.cu does not exist");
  expect_rejected(with({"--timeout", "0"}), "--timeout must be positive");
  expect_rejected({"eval", "99999", "--solution", "reference", "--full"}, "99999");
  // A request that is right gets as far as looking for GPUs (none here, or hidden).
  auto r = testing::run_pkb(with({"--worlds", "2,4", "--gpus", "4", "--oversubscribe"}), dir, {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("no GPU is visible"), std::string::npos) << r.err;
}

TEST_F(EvalCli, SweepRangesAreCheckedBeforeTheGpus) {
  expect_rejected({"sweep", "1", "-b", "1M", "-e", "4K"}, "need 0 < -b <= -e");
  expect_rejected({"sweep", "1", "-f", "1"}, "the factor -f must be greater than 1");
}

// One broken spec.toml is named on stderr (with its error) and the other problems are still listed;
// the exit status says that something was wrong.
TEST_F(EvalCli, ListNamesABrokenSpecAndListsTheRest) {
  fs::path problems = dir / "problems";
  fs::create_directories(problems);
  fs::copy(fs::path(PKB_TEST_SOURCE_DIR) / "problems" / "1_allreduce", problems / "1_allreduce", fs::copy_options::recursive);
  fs::create_directories(problems / "2_broken");
  std::ofstream(problems / "2_broken" / "spec.toml") << "id = 2\nname = \"broken\"\nthis is not toml\n";
  auto r = testing::run_pkb({"list", "--problems-dir", problems.string()}, dir);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("pkb list: skipped 2_broken:"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("allreduce"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 problems in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 with a broken spec.toml"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pkb
