// The two processes of one rank (docs/evaluation.md, "Threat model"). The checker is the process a
// launcher starts: it holds the plan with its seeds, generates inputs, poisons, fingerprints,
// samples, copies outputs and speaks the driver's protocol. It starts the runner, a second instance
// of pkb-worker, which owns NCCL, cuBLAS and the solution's stream, loads the solution and only
// carries out the checker's operations: "run call k on input set a into output set b with these
// per-call parameter values". The runner gets a plan without any seed (seal_for_runner) and sees
// tensor memory only through the mappings the checker passes it.
#pragma once
#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace pkb::worker {

/// The runner's main loop on `fd` (its channel to the checker); device is the GPU to use. Returns
/// the process's exit code.
int run_runner(int fd, int device);

/// The checker's end of the channel to its runner.
class RunnerLink {
 public:
  /// Forks and execs `exe` as the runner for `device`. `oversubscribed` widens the statuses the
  /// runner may report (unsupported: symmetric memory refused).
  RunnerLink(const std::string& exe, int device, bool oversubscribed);
  ~RunnerLink();
  RunnerLink(const RunnerLink&) = delete;
  RunnerLink& operator=(const RunnerLink&) = delete;

  /// Sends one operation (and descriptors, passed after it).
  void send(const nlohmann::json& op, const std::vector<int>& fds = {});
  /// The runner's next reply. A failure it reports becomes a WorkerFailure with the status it may
  /// claim; a message of another kind, or a status only the checker decides, is a protocol_error;
  /// its death ends this process the same way (same signal, same exit code), so that the driver
  /// sees the rank's crash as before.
  nlohmann::json receive();
  nlohmann::json call(const nlohmann::json& op, const std::vector<int>& fds = {}) {
    send(op, fds);
    return receive();
  }
  /// Marks the solution as loaded: from then on the runner cannot report harness_error.
  void loaded() { loaded_ = true; }
  /// Called (instead of throwing a WorkerFailure) when the runner failed or broke the protocol: the
  /// checker reports and exits at once. Unwinding would free CUDA memory, which synchronizes the
  /// checker's stream, which may be waiting on an event the failed runner will never record.
  void on_failure(std::function<void(Status, const std::string&)> f) { on_failure_ = std::move(f); }
  /// Waits for the runner's normal exit after teardown.
  void wait_exit();

 private:
  [[noreturn]] void died(const std::string& how);
  [[noreturn]] void failed(Status s, const std::string& message);
  std::function<void(Status, const std::string&)> on_failure_;
  int fd_ = -1, pidfd_ = -1;
  pid_t pid_ = -1;
  bool oversubscribed_ = false, loaded_ = false, exited_ = false;
};

/// Which failure statuses the runner may report: runtime_error always; load_error and harness_error
/// only before the solution was loaded; unsupported only when ranks share GPUs. Everything else
/// (ok, mismatch, flagged, ...) is decided by the checker or the driver.
inline bool runner_may_report(Status s, bool loaded, bool oversubscribed) {
  switch (s) {
    case Status::runtime_error: return true;
    case Status::load_error:
    case Status::harness_error: return !loaded;
    case Status::unsupported: return oversubscribed;
    default: return false;
  }
}

}  // namespace pkb::worker
