// pkb-worker: one rank of a job. Started by a launcher with --control-fd (the driver's channel),
// --rank and --world; everything else arrives in the plan message. Never started by hand.
// That process is the rank's checker; it starts itself again with --runner-fd as the runner, the
// process the solution is loaded into (worker/runner.hpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "launch/launch_env.hpp"
#include "proto/channel.hpp"
#include "worker/runner.hpp"
#include "worker/session.hpp"

namespace {

struct Args {
  int fd = -1, rank = -1, world = -1;
  int runner_fd = -1, device = -1;  // started by a checker as its runner
  std::string connect, secret;  // started by a job launcher (mpirun/srun): join the driver over TCP
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (k == "--control-fd") a.fd = v;
    else if (k == "--rank") a.rank = v;
    else if (k == "--world") a.world = v;
    else if (k == "--runner-fd") a.runner_fd = v;
    else if (k == "--device") a.device = v;
    else if (k == "--connect") a.connect = argv[i + 1];
    else if (k == "--secret") a.secret = argv[i + 1];
  }
  return a;
}

void report(int fd, pkb::Status status, const std::string& phase, const std::string& message) {
  try {
    pkb::send_message(fd,
                      {pkb::MsgKind::error,
                       nlohmann::json{{"status", std::string(pkb::to_string(status))}, {"phase", phase}, {"message", message}},
                       {}});
  } catch (...) {
    // The driver is gone; nothing more to say.
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.runner_fd >= 0 && a.device >= 0) return pkb::worker::run_runner(a.runner_fd, a.device);
  int local_rank = -1;
  if (!a.connect.empty()) {
    try {
      auto env = pkb::launch_env();
      if (!env) throw pkb::Error(pkb::Errc::invalid_argument, "no OpenMPI/PMI/Slurm rank in the environment");
      a.rank = env->rank;
      local_rank = env->local_rank;
      a.fd = pkb::join_job(a.connect, a.secret, *env);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pkb-worker: cannot join the driver at %s: %s\n", a.connect.c_str(), e.what());
      return 3;
    }
  }
  if (a.fd < 0 || a.rank < 0 || a.world < 1) {
    std::fprintf(stderr, "pkb-worker is started by pkb (pkb run / pkb eval), not by hand\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // The checker holds the secrets: the runner (same user) may neither trace it nor open its /proc
  // entries, memory or descriptors, and does not inherit the driver's channel.
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::fprintf(stderr, "pkb-worker: cannot find its own program (/proc/self/exe)\n");
    return 3;
  }
  exe[n] = '\0';
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  fcntl(a.fd, F_SETFD, FD_CLOEXEC);
  std::optional<pkb::Message> m;
  try {
    m = pkb::recv_message(a.fd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pkb-worker: bad plan: %s\n", e.what());
    return 3;
  }
  if (!m || m->kind != pkb::MsgKind::plan) {
    std::fprintf(stderr, "pkb-worker: expected a plan message\n");
    return 3;
  }
  pkb::WorkerPlan plan;
  try {
    plan = m->body.get<pkb::WorkerPlan>();
    if (plan.device < 0) plan.device = local_rank >= 0 ? local_rank : plan.rank;  // the launcher's local rank
  } catch (const std::exception& e) {
    report(a.fd, pkb::Status::harness_error, "start", std::string("malformed plan: ") + e.what());
    return 3;
  }
  pkb::worker::Session session(a.fd, plan, exe);
  try {
    session.run();
  } catch (const pkb::worker::WorkerFailure& f) {
    report(a.fd, f.status, session.phase(), f.what());
    std::fflush(nullptr);
    _exit(1);  // skip teardown: peers may be stuck; the driver tears the job down
  } catch (const pkb::Error& e) {
    // A CUDA/NCCL error in harness code after the solution was loaded is charged to the solution:
    // its kernels are the usual cause of a sticky error the harness then trips over.
    bool candidate_ran = session.phase() != "start" && session.phase() != "setup";
    report(a.fd, candidate_ran ? pkb::Status::runtime_error : pkb::Status::harness_error, session.phase(), e.what());
    std::fflush(nullptr);
    _exit(1);
  } catch (const std::exception& e) {
    // Once the solution is loaded, its GPU work shares the device with the checker's: an error here
    // is charged to it.
    bool candidate_ran = session.phase() != "start" && session.phase() != "setup";
    report(a.fd, candidate_ran ? pkb::Status::runtime_error : pkb::Status::harness_error, session.phase(),
           std::string("worker: ") + e.what());
    std::fflush(nullptr);
    _exit(1);
  } catch (...) {
    bool candidate_ran = session.phase() != "start" && session.phase() != "setup";
    report(a.fd, candidate_ran ? pkb::Status::runtime_error : pkb::Status::harness_error, session.phase(),
           "worker: a non-standard exception");
    std::fflush(nullptr);
    _exit(1);
  }
  std::fflush(nullptr);
  _exit(0);
}
