// The job runner against fake workers: deadlines, crash propagation, protocol abuse, leftovers.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "eval/job.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

class JobTest : public ::testing::Test {
 protected:
  fs::path tmp;
  void SetUp() override {
    tmp = fs::temp_directory_path() / ("pkb_job_test_" + std::to_string(getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp);
    fs::create_directories(tmp / "pids");
  }
  void TearDown() override {
    // Whatever happened, nothing may be left running.
    for (pid_t p : pids()) ::kill(p, SIGKILL);
    fs::remove_all(tmp);
  }
  std::vector<pid_t> pids() {
    std::vector<pid_t> out;
    for (auto& e : fs::directory_iterator(tmp / "pids")) out.push_back(std::stoi(e.path().filename().string()));
    return out;
  }
  /// Running (a zombie waiting for its reaper is dead for our purpose).
  bool alive(pid_t p) {
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
  }

  JobResult run(const std::string& mode, int world = 3, bool timing = true, int steps = 1, bool mpi = false) {
    JobConfig cfg;
    cfg.launch.world = world;
    cfg.launch.worker_argv = {PKB_FAKE_WORKER};
    cfg.launch.env = {{"PKB_FAKE_MODE", mode}, {"PKB_FAKE_PIDS", (tmp / "pids").string()}};
    cfg.launch.log_dir = tmp / "logs";
    cfg.deadlines.trial = std::chrono::milliseconds(1500);
    cfg.deadlines.teardown = std::chrono::milliseconds(1000);
    for (int r = 0; r < world; ++r) {
      WorkerPlan p;
      p.world = world;
      p.rank = r;
      p.nccl_id_hex = "00";
      for (int s = 0; s < steps; ++s) {
        StepPlan st;
        st.trials = 2;
        st.seed = 77 + s;
        st.outputs.push_back({"out", DType::fp32, {4, 4 * (s + 1)}, {}});
        st.timing.enabled = timing;
        st.timing.iters = 5;
        p.steps.push_back(st);
      }
      cfg.plans.push_back(p);
    }
    if (mpi) {
      MpiOptions mo;
      mo.command = {PKB_FAKE_MPIRUN};
      mo.connect_timeout = std::chrono::seconds(20);
      MpiLauncher l(mo);
      return run_job(l, cfg);
    }
    LocalLauncher l;
    return run_job(l, cfg);
  }
};

TEST_F(JobTest, HealthyJobDeliversEverything) {
  auto r = run("ok", 3, true, 2);
  EXPECT_EQ(r.status, Status::ok) << r.message;
  ASSERT_EQ(r.steps.size(), 2u);
  ASSERT_EQ(r.steps[0].trials.size(), 2u);
  ASSERT_EQ(r.steps[0].trials[1].size(), 3u);
  EXPECT_EQ(r.steps[0].trials[1][2].outputs[0].size(), 64u);
  EXPECT_EQ(r.steps[1].trials[1][2].outputs[0].size(), 128u);
  ASSERT_EQ(r.steps[1].timing.size(), 3u);
  EXPECT_EQ(r.steps[1].timing[1].body["times_ms"].size(), 5u);
  EXPECT_TRUE(r.steps[1].complete);
  EXPECT_TRUE(r.teardown_clean);
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

TEST_F(JobTest, HangIsATimeoutWithinTheDeadlineAndKillsEveryone) {
  auto t0 = Clock::now();
  auto r = run("hang:1:trial 0");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, Status::timeout);
  EXPECT_EQ(r.phase, "trial 0");
  EXPECT_LT(s, 6.0);
  EXPECT_NE(r.message.find("trial 0"), std::string::npos) << r.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p)) << p;
}

TEST_F(JobTest, CrashOfOneRankIsChargedToItWhilePeersHang) {
  auto r = run("crash:2:trial 1");
  EXPECT_EQ(r.status, Status::crash);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.phase, "trial 1");
  EXPECT_NE(r.message.find("signal 6"), std::string::npos) << r.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

TEST_F(JobTest, SilentEarlyExitIsACrash) {
  auto r = run("exit:0:init");
  EXPECT_EQ(r.status, Status::crash);
  EXPECT_EQ(r.rank, 0);
  EXPECT_NE(r.message.find("exited with code 0"), std::string::npos) << r.message;
}

TEST_F(JobTest, ReportedErrorKeepsItsStatusAndMessage) {
  auto r = run("error:1:timing");
  EXPECT_EQ(r.status, Status::runtime_error);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.phase, "timing");
  EXPECT_EQ(r.message, "fake failure on purpose");
}

TEST_F(JobTest, ProtocolGarbageIsAFailureNotAHang) {
  auto r = run("garbage:1:trial 0");
  EXPECT_EQ(r.status, Status::runtime_error);
  EXPECT_NE(r.message.find("control protocol"), std::string::npos) << r.message;
}

TEST_F(JobTest, ExitWhileAChildHoldsTheChannelIsStillDetected) {
  auto t0 = Clock::now();
  auto r = run("daemon:0:trial 0");
  EXPECT_EQ(r.status, Status::crash);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  // A setsid() daemon escapes the process group; only a cgroup catches it.
  if (r.containment != "process-group")
    for (pid_t p : pids()) EXPECT_FALSE(alive(p)) << p << " survived (" << r.containment << ")";
}

TEST_F(JobTest, ProcessesLeftBehindAreCountedAndKilled) {
  auto r = run("linger:1:finalize");
  EXPECT_EQ(r.status, Status::ok) << r.message;
  EXPECT_GE(r.leftover_processes, 1u) << r.containment;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p)) << p;
}

TEST_F(JobTest, HangInTeardownIsNotChargedButKilled) {
  auto r = run("hang:1:teardown");
  EXPECT_EQ(r.status, Status::ok) << r.message;
  EXPECT_FALSE(r.teardown_clean);
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// The same job through a launcher (a stand-in for mpirun): workers join over TCP with the secret.
TEST_F(JobTest, MpiLaunchedJobDeliversEverything) {
  auto r = run("ok", 3, true, 2, true);
  EXPECT_EQ(r.status, Status::ok) << r.message;
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1].trials[1][2].outputs[0].size(), 128u);
  ASSERT_EQ(r.steps[0].timing.size(), 3u);
  EXPECT_EQ(r.containment, "launcher process group");
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

TEST_F(JobTest, MpiLaunchedCrashAndHangEndTheJob) {
  auto c = run("crash:1:trial 0", 2, false, 1, true);
  EXPECT_EQ(c.status, Status::crash) << c.message;
  auto h = run("hang:0:trial 1", 2, false, 1, true);
  EXPECT_EQ(h.status, Status::timeout) << h.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p)) << p;
}

TEST_F(JobTest, MissingWorkerBinaryIsAnError) {
  JobConfig cfg;
  cfg.launch.world = 2;
  cfg.launch.worker_argv = {"/nonexistent/pkb-worker"};
  cfg.launch.log_dir = tmp / "logs";
  cfg.plans.resize(2);
  for (auto& p : cfg.plans) p.steps.resize(1);
  LocalLauncher l;
  EXPECT_THROW(run_job(l, cfg), Error);
}

}  // namespace
}  // namespace pkb
