// The job runner against fake workers: deadlines, crash propagation, protocol abuse, leftovers.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <sstream>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "eval/job.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

  JobResult run(const std::string& mode, int world = 3, bool timing = true, int steps = 1, bool mpi = false,
                std::chrono::milliseconds job_deadline = std::chrono::milliseconds(0),
                std::function<void(JobConfig&)> adjust = nullptr) {
    JobConfig cfg;
    cfg.deadlines.job = job_deadline;
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
    if (adjust) adjust(cfg);
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
  EXPECT_EQ(r.status, Status::protocol_error);
  EXPECT_EQ(r.rank, 1);
  EXPECT_NE(r.message.find("control protocol"), std::string::npos) << r.message;
}

// A well-formed frame without a key the checks need is the worker's protocol violation (it used to
// throw inside the driver: an internal error and no record).
TEST_F(JobTest, FrameMissingAKeyIsTheWorkersProtocolError) {
  auto r = run("badframe:2:trial 0");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_EQ(r.rank, 2);
  EXPECT_NE(r.message.find("outputs"), std::string::npos) << r.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// Every phase within its own limit, the job as a whole past its deadline: a timeout, charged to the
// slow rank, from the driver's clock.
TEST_F(JobTest, JobDeadlineHoldsWhenEveryPhaseIsWithinItsLimit) {
  auto t0 = Clock::now();
  auto r = run("slow:1:", 2, true, 1, false, std::chrono::milliseconds(2500));
  EXPECT_EQ(r.status, Status::timeout) << r.message;
  EXPECT_EQ(r.rank, 1);
  EXPECT_NE(r.message.find("the job ran past its deadline of 2.5 s"), std::string::npos) << r.message;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// A root driver's workers run as an unprivileged user with no_new_privs: they cannot append to the
// driver's files (a results file, say) nor move themselves out of the job's cgroup.
TEST_F(JobTest, SandboxedWorkersRunUnprivilegedAndCannotWriteTheDriversFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the driver drops privileges only when it has them)";
  struct passwd* pw = getpwnam("nobody");
  if (!pw) GTEST_SKIP() << "no user nobody";
  // The worker program where the user can reach it, as the evaluator places it (flows.cpp).
  fs::path dir = tmp / "job";
  fs::create_directories(dir);
  fs::permissions(tmp, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  fs::copy_file(PKB_FAKE_WORKER, dir / "fake-worker");
  fs::path victim = dir / "results.jsonl";
  std::ofstream(victim) << "{}\n";
  fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  auto r = run("probe:0:setup", 1, false, 1, false, std::chrono::milliseconds(0), [&](JobConfig& c) {
    c.launch.worker_argv = {(dir / "fake-worker").string()};
    c.launch.env.emplace_back("PKB_FAKE_VICTIM", victim.string());
    c.launch.sandbox_user = "nobody";
    c.launch.sandbox_home = dir / "home";
  });
  EXPECT_EQ(r.sandbox, "user nobody (uid " + std::to_string(pw->pw_uid) + "), no_new_privs");
  EXPECT_NE(r.message.find("uid=" + std::to_string(pw->pw_uid)), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("nnp=1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("victim=Permission denied"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("cgroup=written"), std::string::npos) << r.message;
  EXPECT_EQ(read_all(victim), "{}\n");
}

// The sample count of the timed calls is the driver's, not the worker's: reporting none (so that
// nothing is compared) is a protocol violation, not a pass.
TEST_F(JobTest, TimedCallsWithoutTheirPlannedSamplesAreAProtocolError) {
  auto r = run("nosamples");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_NE(r.message.find("0 sampled values of output 0 per call reported, 16 planned"), std::string::npos) << r.message;
}

// Phases can be announced without their work; results cannot be skipped: 'done' without every
// trial's results is the worker's protocol_error (it used to reach the checks and throw there).
TEST_F(JobTest, DoneWithoutTheResultsIsAProtocolError) {
  auto r = run("skipahead:1:trial 0");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_EQ(r.rank, 1);
  EXPECT_NE(r.message.find("'done' without the results of step 0 trial 0"), std::string::npos) << r.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

TEST_F(JobTest, ResultsOutOfTheirPhaseAreAProtocolError) {
  auto r = run("earlytrial:0:trial 0");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_NE(r.message.find("arrived during trial 0"), std::string::npos) << r.message;
}

// Re-announcing a phase does not restart its deadline: it is a violation at once.
TEST_F(JobTest, ReannouncedPhaseIsAViolationNotAHeartbeat) {
  auto t0 = Clock::now();
  auto r = run("reannounce:1:trial 0");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_NE(r.message.find("announced again"), std::string::npos) << r.message;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
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
