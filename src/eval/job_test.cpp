// The job runner against fake workers: deadlines, crash propagation, protocol abuse, leftovers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include <filesystem>
#include <fstream>

#include "core/digest.hpp"
#include "core/error.hpp"
#include "eval/internal.hpp"
#include "eval/job.hpp"
#include "proc/netns.hpp"

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
    tmp = fs::temp_directory_path() /
          ("pkb_job_test_" + std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
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
  // Every timed call was committed as it ran, inside the driver's own clock.
  ASSERT_EQ(r.steps[1].calls.size(), 3u);
  ASSERT_EQ(r.steps[1].calls[2].size(), 5u);
  for (auto& c : r.steps[1].calls[2]) {
    EXPECT_GT(c.received_s, c.granted_s);
    EXPECT_NEAR(c.time_ms, 0.012, 1e-12);
  }
  EXPECT_EQ(r.steps[1].full_calls.size(), 2u);
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// No worker is told a step's seed: the plan it receives carries only the trials' and the warm-up's
// seeds, from which no timed call's inputs, poison or sample positions follow.
TEST(Plan, TheWorkersPlanHoldsNoSecret) {
  WorkerPlan p;
  StepPlan st;
  st.seed = 0x1234567890abcdefull;
  st.trials = 3;
  st.timing.iters = 4;
  p.steps.push_back(st);
  nlohmann::json j = seal_for_worker(p);
  std::string text = j.dump();
  EXPECT_EQ(text.find("seed\":" + std::to_string(st.seed)), std::string::npos) << text;
  EXPECT_EQ(text.find(std::to_string(st.seed)), std::string::npos) << text;
  for (int i = 0; i < st.timing.iters; ++i) {
    EXPECT_EQ(text.find(std::to_string(stream_seed(st.seed, kTimedStream + i))), std::string::npos);
    EXPECT_EQ(text.find(std::to_string(sample_key(st.seed, i))), std::string::npos);
  }
  auto back = j.get<WorkerPlan>();
  ASSERT_EQ(back.steps[0].trial_seeds.size(), 3u);
  EXPECT_EQ(back.steps[0].trial_seeds[2], stream_seed(st.seed, 2));
  EXPECT_EQ(back.steps[0].seed, 0u);
  // The derived seeds differ per stream, and the full-check calls are distinct and in range.
  EXPECT_NE(stream_seed(st.seed, 0), stream_seed(st.seed, 1));
  auto full = full_check_calls(st.seed, 100, 3);
  ASSERT_EQ(full.size(), 3u);
  EXPECT_TRUE(full[0] < full[1] && full[1] < full[2] && full[2] < 100);
  EXPECT_EQ(full_check_calls(st.seed, 2, 5).size(), 2u);
}

// --profile: every rank's frame reaches the step; a rank without CUPTI sends its reason, and the
// job is still ok; a job without --profile has no profile phase.
TEST_F(JobTest, AProfiledJobDeliversEveryRanksProfileAndAMissingOneChangesNothing) {
  auto profiled = [](JobConfig& c) {
    for (auto& p : c.plans)
      for (auto& s : p.steps) s.profile_calls = 5;
  };
  auto r = run("ok", 2, true, 2, false, std::chrono::milliseconds(0), profiled);
  EXPECT_EQ(r.status, Status::ok) << r.message;
  for (auto& st : r.steps) {
    ASSERT_EQ(st.profile.size(), 2u);
    EXPECT_EQ(st.profile[1]["activity"]["calls"].size(), 1u) << st.profile[1];
  }
  auto refused = run("nocupti:1", 2, true, 1, false, std::chrono::milliseconds(0), profiled);
  EXPECT_EQ(refused.status, Status::ok) << refused.message;  // no profile is no failure
  ASSERT_EQ(refused.steps[0].profile.size(), 2u);
  EXPECT_EQ(refused.steps[0].profile[1]["error"], "CUPTI cannot enable an activity kind: fake");
  auto plain = run("ok", 2, true, 1);  // without --profile: no profile phase, no frames
  EXPECT_EQ(plain.status, Status::ok) << plain.message;
  EXPECT_TRUE(plain.steps[0].profile.empty());
}

// A timing report without the calls committed one by one, or a call committed twice, breaks the
// protocol: the per-call commits are what the checks and the driver's clock rest on.
TEST_F(JobTest, TimedCallsMustBeCommittedOneByOne) {
  auto r = run("nocommit");
  EXPECT_EQ(r.status, Status::protocol_error) << r.message;
  EXPECT_NE(r.message.find("before every timed call was committed"), std::string::npos) << r.message;
  auto t = run("twice");
  EXPECT_EQ(t.status, Status::protocol_error) << t.message;
  EXPECT_NE(t.message.find("timed call 0 reported, call 1 expected"), std::string::npos) << t.message;
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// Times count as committed: a final report with shorter times is flagged, and the committed ones
// are what the summary uses.
TEST_F(JobTest, AFinalReportThatShortensTheCommittedTimesIsFlagged) {
  auto r = run("shorttimes");
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EvalRecord rec;
  SideTiming st = detail::summarize_timing(r.steps[0], rec, "candidate");
  EXPECT_NEAR(st.us.median, 12.0, 1e-6);  // the slowest rank's committed 0.012 ms, not half of it
  EXPECT_GE(st.driver_overhead_us, 0.0);
  auto bad = std::find_if(rec.checks.begin(), rec.checks.end(), [](const Check& c) { return !c.ok; });
  ASSERT_NE(bad, rec.checks.end());
  EXPECT_EQ(bad->status, Status::flagged);
  EXPECT_NE(bad->message.find("differ from those committed"), std::string::npos) << bad->message;
}

// A candidate whose driver-clock overhead per call is far above the baseline's did work outside its
// timed interval (or reported short times): flagged on one GPU per rank, a warning when oversubscribed.
TEST(Overheads, WorkOutsideTheTimedIntervalIsFlagged) {
  EvalRecord rec;
  rec.baseline_timing.driver_overhead_us = 80;
  rec.candidate_timing.driver_overhead_us = 150;
  detail::compare_overheads(rec, false);
  EXPECT_TRUE(rec.checks.empty());
  rec.candidate_timing.driver_overhead_us = 900;
  detail::compare_overheads(rec, true);
  EXPECT_TRUE(rec.checks.empty());
  ASSERT_EQ(rec.warnings.size(), 1u);
  detail::compare_overheads(rec, false);
  ASSERT_EQ(rec.checks.size(), 1u);
  EXPECT_EQ(rec.checks[0].status, Status::flagged);
  EXPECT_NE(rec.checks[0].message.find("900.0 us"), std::string::npos) << rec.checks[0].message;
}

// Interleaved timing: two jobs alive at once take turns in rounds of timed calls (eval/gate.hpp).
// On the driver's clock, every round of one job lies between the other's rounds before and after.
TEST_F(JobTest, InterleavedJobsTakeTurnsOnTheDriversClock) {
  CallGate gate(2, 2);
  JobResult res[2];
  auto side = [&](int j) {
    res[j] = run("ok", 2, true, 1, false, std::chrono::milliseconds(0), [&](JobConfig& c) {
      c.gate = &gate;
      c.gate_side = j;
      c.launch.log_dir = tmp / ("logs" + std::to_string(j));
      for (auto& p : c.plans) p.steps[0].timing.iters = 6;
    });
  };
  std::thread base([&] { side(0); });
  side(1);
  base.join();
  // A round of a job on the common clock: from the first grant to the last commit of its calls.
  auto window = [&](int j, int k) {
    double from = 1e300, to = -1e300;
    const auto& calls = res[j].steps.at(0).calls;
    double epoch = std::chrono::duration<double>(res[j].started - res[0].started).count();
    for (auto& rank_calls : calls)
      for (int i = 2 * k; i < 2 * k + 2; ++i) {
        from = std::min(from, epoch + rank_calls.at(static_cast<size_t>(i)).granted_s);
        to = std::max(to, epoch + rank_calls.at(static_cast<size_t>(i)).received_s);
      }
    return std::make_pair(from, to);
  };
  for (int j = 0; j < 2; ++j) {
    ASSERT_EQ(res[j].status, Status::ok) << res[j].message;
    ASSERT_EQ(res[j].steps.at(0).calls.size(), 2u);
    ASSERT_EQ(res[j].steps.at(0).calls[0].size(), 6u);
  }
  for (int k = 0; k < 3; ++k) {
    auto b = window(0, k), c = window(1, k);
    EXPECT_LT(b.second, c.first) << "round " << k << ": the candidate's round began before the baseline's ended";
    if (k + 1 < 3) EXPECT_LT(c.second, window(0, k + 1).first) << "round " << k + 1 << " of the baseline overlapped";
  }
  for (pid_t p : pids()) EXPECT_FALSE(alive(p));
}

// A job that fails does not leave the other waiting at the gate.
TEST_F(JobTest, AnInterleavedJobThatCrashesReleasesTheOther) {
  CallGate gate(2, 1);
  JobResult res[2];
  std::thread crashing([&] {
    res[1] = run("crash:1:timing", 2, true, 1, false, std::chrono::milliseconds(0), [&](JobConfig& c) {
      c.gate = &gate;
      c.gate_side = 1;
      c.launch.log_dir = tmp / "logs1";
    });
  });
  res[0] = run("ok", 2, true, 1, false, std::chrono::milliseconds(0), [&](JobConfig& c) {
    c.gate = &gate;
    c.gate_side = 0;
    c.launch.log_dir = tmp / "logs0";
  });
  crashing.join();
  EXPECT_EQ(res[0].status, Status::ok) << res[0].message;
  EXPECT_NE(res[1].status, Status::ok);
  EXPECT_EQ(res[0].steps.at(0).calls.at(0).size(), 5u);
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

// Where the time went: each phase group's seconds, the slowest rank's, in the order they ran, by
// the driver's clock. Rank 1 spends 700 ms in every phase; a failed job has none.
TEST_F(JobTest, PhaseTimesAreTheSlowestRanksInTheOrderTheyRan) {
  auto r = run("slow:1:", 2, true, 1);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  std::vector<std::string> order;
  double sum = 0;
  for (auto& [phase, secs] : r.phase_s) {
    order.push_back(phase);
    sum += secs;
    EXPECT_GE(secs, 0) << phase;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"start", "setup", "load", "init", "trials", "timing", "finalize", "teardown"}));
  auto secs = [&](const std::string& phase) {
    for (auto& [p, s] : r.phase_s)
      if (p == phase) return s;
    return -1.0;
  };
  // Rank 1 sleeps 700 ms after announcing each phase; the driver times a phase from its receipt of
  // one announcement to the next, so a late receipt of the first shortens it (a CI run saw 698 ms).
  EXPECT_GE(secs("setup"), 0.65);
  EXPECT_GE(secs("trials"), 1.35);  // both trials in one group
  EXPECT_LT(secs("trials"), 2.5);
  EXPECT_GE(secs("timing"), 0.65);
  // Each phase is its slowest rank's, and the slowest rank can differ from phase to phase (by the
  // ranks' skew, microseconds here): the sum may pass the wall clock by that much, no more.
  EXPECT_LE(sum, r.wall_s + 0.05);
  EXPECT_GT(sum, 0.9 * r.wall_s);  // the phases account for the job's time

  auto failed = run("crash:0:trial 0", 2);
  EXPECT_EQ(failed.status, Status::crash);
  EXPECT_TRUE(failed.phase_s.empty());
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
  // A TCP port of the driver's: the workers, in a network namespace of their own, cannot reach it.
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto netns = NetworkNamespace::create();
  auto r = run("probe:0:setup", 1, false, 1, false, std::chrono::milliseconds(0), [&](JobConfig& c) {
    c.launch.worker_argv = {(dir / "fake-worker").string()};
    c.launch.env.emplace_back("PKB_FAKE_VICTIM", victim.string());
    c.launch.env.emplace_back("PKB_FAKE_PORT", std::to_string(ntohs(a.sin_port)));
    c.launch.sandbox_user = "nobody";
    c.launch.sandbox_home = dir / "home";
    c.launch.netns_fd = netns->fd();
  });
  close(listener);
  EXPECT_NE(r.message.find("net=lo "), std::string::npos) << r.message;  // loopback, nothing else
  EXPECT_NE(r.message.find("tcp=Connection refused"), std::string::npos) << r.message;
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

namespace pkb {
namespace {

/// One rank, one fp32 output of 8 elements, 3 timed calls with 2 samples each, call 1 fully checked;
/// every call committed with the fingerprint of `full` (what the worker saw at return).
StepResult timed_side(const std::vector<float>& full, const std::string& final_digest_of_call2 = "") {
  StepResult sr;
  std::string bytes(reinterpret_cast<const char*>(full.data()), full.size() * sizeof(float));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest_bytes(bytes.data(), bytes.size())));
  std::vector<std::string> digests(3, hex);
  sr.calls.resize(1);
  for (int i = 0; i < 3; ++i) sr.calls[0].push_back({0.01, {hex}, {0}, {0}, 0.0, 1.0});
  if (!final_digest_of_call2.empty()) digests[2] = final_digest_of_call2;
  nlohmann::json body{{"iters", 3},
                      {"outputs", {{{"digests", digests}, {"unwritten", {0, 0, 0}}, {"nonfinite", {0, 0, 0}}, {"samples", 2}}}},
                      {"inputs", nlohmann::json::array()}};
  std::string blob;
  for (int i = 0; i < 3; ++i) blob.append(bytes.data(), 2 * sizeof(float));  // samples: the first two elements
  blob += bytes;  // call 1, whole
  sr.timing.push_back({body, blob});
  sr.full_calls = {1};
  return sr;
}

Instance one_output_instance() {
  Instance inst;
  inst.world = 1;
  RankPlan rp;
  TensorPlan out;
  out.name = "out";
  out.dtype = DType::fp32;
  out.shape = {8};
  out.compare = default_comparison(DType::fp32, Tolerance{});
  rp.outputs.push_back(out);
  inst.ranks.push_back(rp);
  return inst;
}

// A fully checked call is compared element by element: a value no sample looked at still fails.
TEST(TimedChecks, AFullyCheckedCallComparesEveryElement) {
  Instance inst = one_output_instance();
  std::vector<float> want{1, 2, 3, 4, 5, 6, 7, 8}, got = want;
  EvalRecord same;
  detail::check_timed_calls(inst, timed_side(want), timed_side(got), same);
  EXPECT_TRUE(same.checks.empty());
  got[6] = 70;  // not a sampled position
  EvalRecord rec;
  detail::check_timed_calls(inst, timed_side(want), timed_side(got), rec);
  auto f = rec.checks;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].what.find("timed call 1 rank 0 output 'out' (every element) vs baseline"), std::string::npos) << f[0].what;
}

/// One trial of one rank with output `v`, fingerprinted as a worker reports it.
StepResult trial_side(const std::vector<float>& v) {
  StepResult sr;
  std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest_bytes(bytes.data(), bytes.size())));
  RankTrial rt;
  rt.outputs = {bytes};
  rt.meta = {{"outputs", {{{"digest_return", hex}, {"digest_after", hex}, {"poison", "7fc00001"}}}},
             {"inputs", nlohmann::json::array()}};
  sr.trials = {{rt}};
  return sr;
}

// `nonfinite = "as_baseline"`: -inf is right where the baseline has -inf, and wrong elsewhere; without
// the key any non-finite output fails its sanity check.
TEST(TrialChecks, NonFiniteOutputsWhereTheBaselineHasThem) {
  Instance inst = one_output_instance();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> base{1, 2, -inf, 4, 5, 6, 7, 8};
  EvalRecord strict;
  detail::check_sanity(inst, trial_side(base), strict);
  ASSERT_EQ(strict.checks.size(), 1u);
  EXPECT_NE(strict.checks[0].what.find("finite"), std::string::npos);

  inst.ranks[0].outputs[0].compare.nonfinite_as_expected = true;
  EvalRecord ok;
  detail::check_sanity(inst, trial_side(base), ok);
  detail::check_trials(inst, trial_side(base), trial_side(base), ok);
  EXPECT_TRUE(ok.checks.empty());
  std::vector<float> moved = base;
  moved[2] = 3;
  moved[5] = -inf;  // -inf where the baseline is finite
  EvalRecord bad;
  detail::check_sanity(inst, trial_side(moved), bad);
  EXPECT_TRUE(bad.checks.empty()) << "sanity leaves it to the comparison";
  detail::check_trials(inst, trial_side(base), trial_side(moved), bad);
  ASSERT_EQ(bad.checks.size(), 1u);
  EXPECT_EQ(bad.checks[0].status, Status::mismatch);
}

// What was committed at return must be what the report says after every rank finished.
TEST(TimedChecks, AnOutputThatChangedAfterItsCommitIsAMismatch) {
  Instance inst = one_output_instance();
  std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8};
  EvalRecord rec;
  detail::check_timed_calls(inst, timed_side(v), timed_side(v, "00000000deadbeef"), rec);
  auto f = rec.checks;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].status, Status::mismatch);
  EXPECT_NE(f[0].message.find("changed after pkb_run returned"), std::string::npos) << f[0].message;
}

}  // namespace
}  // namespace pkb
