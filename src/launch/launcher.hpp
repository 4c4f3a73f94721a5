// Starting a job's workers, one process per GPU, and taking them down again. The evaluator talks
// to a Job through its control channels and never cares how the processes were started: local
// fork/exec today, mpirun/srun for several nodes behind the same interface.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proc/process.hpp"

namespace pkb {

struct LaunchRequest {
  int world = 0;
  /// The worker program and its fixed arguments; the launcher appends
  /// `--control-fd <fd> --rank <r> --world <W>`.
  std::vector<std::string> worker_argv;
  std::vector<std::pair<std::string, std::string>> env;
  /// Each rank's stdout and stderr go to <log_dir>/rank_<r>.log.
  std::filesystem::path log_dir;
  ResourceLimits limits;
  /// Contain the job in a cgroup where the machine allows (see launch/cgroup.hpp).
  bool use_cgroup = true;
  /// Where the driver is root: run every worker as this user (no supplementary groups,
  /// no_new_privs), with HOME and cwd in `sandbox_home`, a directory the launcher creates for it.
  /// Such workers cannot write the driver's files (results, build cache, problems), nor leave the
  /// job's cgroup. Empty, or a driver that is not root: workers run as the driver's user.
  std::string sandbox_user;
  std::filesystem::path sandbox_home;
  /// Where >= 0: every worker enters this network namespace (proc/netns.hpp) before exec.
  int netns_fd = -1;
};

/// A running job. Destroying it kills and reaps every process it started.
class Job {
 public:
  virtual ~Job() = default;
  virtual int world() const = 0;
  /// The driver's end of rank r's control channel.
  virtual int channel(int rank) const = 0;
  /// Rank r's exit status once it has ended (non-blocking).
  virtual std::optional<ExitInfo> poll_exit(int rank) = 0;
  /// SIGKILL to every process of the job.
  virtual void kill() = 0;
  /// Waits for every rank to end; false if the deadline passed first.
  virtual bool wait_all(Clock::time_point deadline) = 0;
  /// Path of rank r's log file.
  virtual std::filesystem::path log_path(int rank) const = 0;
  /// Whether poll_exit sees each rank's own process (false: only the launcher's, so a rank whose
  /// channel closes without a word is taken as crashed).
  virtual bool exits_per_rank() const { return true; }
  /// How the job is contained: "cgroup2", "cgroup1" or "process-group".
  virtual std::string containment() const = 0;
  /// Whom the workers run as, and why: "user nobody (uid 65534), no_new_privs", or a sentence
  /// starting "not isolated: " saying why they run as the driver's user.
  virtual std::string sandbox() const { return "not isolated: the launcher starts the workers"; }
  bool isolated() const { return sandbox().rfind("not isolated", 0) != 0; }
  /// Processes of the job other than its workers that are still running (call after the workers
  /// have exited: anything left was started by the solution).
  virtual std::vector<pid_t> leftovers() = 0;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::unique_ptr<Job> launch(const LaunchRequest& req) = 0;
};

/// fork/exec on this host: all ranks in one new process group, control channels over socketpairs
/// (pkb opens no TCP port; NCCL's own bootstrap still listens on one per rank), NCCL_NVLS_ENABLE=0
/// forced in every worker's environment.
class LocalLauncher : public Launcher {
 public:
  std::unique_ptr<Job> launch(const LaunchRequest& req) override;
};

/// mpirun/srun: workers started by a job launcher (possibly on several hosts) connect back to the
/// driver over TCP and prove they belong to this job with a per-job secret. Ranks and local ranks
/// (the GPU each worker takes) come from the launcher's environment (launch/launch_env.hpp).
struct MpiOptions {
  std::vector<std::string> command = {"mpirun"};  // the launcher and its own flags (--hostfile, ...)
  std::string bind_address = "127.0.0.1";  // where the driver listens ("0.0.0.0" for several hosts)
  std::string advertise_host;  // the address workers dial (default: bind address, or hostname)
  std::chrono::milliseconds connect_timeout{60000};
};

class MpiLauncher : public Launcher {
 public:
  explicit MpiLauncher(MpiOptions o) : opts_(std::move(o)) {}
  std::unique_ptr<Job> launch(const LaunchRequest& req) override;

 private:
  MpiOptions opts_;
};

/// The environment every worker gets, whatever the launcher (multicast stays off).
std::vector<std::pair<std::string, std::string>> forced_worker_env();

/// The last `max_bytes` of a file ("" if unreadable), for error reports.
std::string tail_of_file(const std::filesystem::path& p, size_t max_bytes = 4096);

}  // namespace pkb
