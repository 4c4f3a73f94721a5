// MpiLauncher: one `mpirun -np W pkb-worker --connect HOST:PORT --secret S` (or srun, or any launcher
// that sets OpenMPI/PMI/Slurm rank variables). Workers join over TCP with the job's secret; the job
// is one launcher process group to kill.
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "launch/launcher.hpp"
#include "proto/channel.hpp"
#include "proto/tcp.hpp"

namespace pkb {

namespace {

std::string random_secret() {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != sizeof b) fail(Errc::io_error, "getrandom failed");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s.push_back(hex[c >> 4]);
    s.push_back(hex[c & 15]);
  }
  return s;
}

bool is_openmpi_like(const std::string& cmd) {
  std::string base = cmd.substr(cmd.find_last_of('/') + 1);
  return base == "mpirun" || base == "mpiexec" || base == "orterun";
}

class MpiJob : public Job {
 public:
  MpiJob(int world, std::filesystem::path log) : log_(std::move(log)), fds_(world, -1) {}
  ~MpiJob() override {
    kill();
    wait_all(Clock::now() + std::chrono::seconds(10));
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  int world() const override { return static_cast<int>(fds_.size()); }
  int channel(int rank) const override { return fds_.at(rank); }
  std::filesystem::path log_path(int) const override { return log_; }
  std::string containment() const override { return "launcher process group"; }
  std::string sandbox() const override { return "not isolated: mpirun/srun start the workers as the driver's user"; }
  bool exits_per_rank() const override { return false; }

  std::optional<ExitInfo> poll_exit(int) override {
    if (!exit_ && pid_ > 0) exit_ = try_reap(pid_);
    return exit_;  // the launcher's exit stands for every rank's
  }
  void kill() override {
    if (pid_ <= 0) return;
    if (!exit_) {
      kill_group(pid_, SIGTERM);  // mpirun forwards SIGTERM to remote daemons; SIGKILL would not
      exit_ = reap_until(pid_, Clock::now() + std::chrono::seconds(3));
    }
    // Workers outlive a launcher that has already exited: the group goes down either way, and the
    // call returns once nothing of it is left (bounded).
    kill_group(pid_, SIGKILL);
    for (auto until = Clock::now() + std::chrono::seconds(2); !processes_in_group(pid_).empty() && Clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  bool wait_all(Clock::time_point deadline) override {
    if (pid_ <= 0) return true;
    if (!exit_) exit_ = reap_until(pid_, deadline);
    return exit_.has_value();
  }
  std::vector<pid_t> leftovers() override { return processes_in_group(pid_); }

  void start(const LaunchRequest& req, const MpiOptions& o) {
    int port = 0;
    listen_fd_ = tcp_listen(o.bind_address, &port);
    std::string host = !o.advertise_host.empty() ? o.advertise_host : o.bind_address;
    if (host == "0.0.0.0") {
      char name[256] = {0};
      gethostname(name, sizeof name - 1);
      host = name;
    }
    std::string secret = random_secret();
    SpawnOptions sp;
    sp.argv = o.command;
    sp.argv.insert(sp.argv.end(), {"-np", std::to_string(req.world)});
    auto env = req.env;
    for (auto& kv : forced_worker_env()) env.push_back(kv);
    if (is_openmpi_like(o.command.at(0)))
      for (auto& [k, v] : env) sp.argv.insert(sp.argv.end(), {"-x", k + "=" + v});
    sp.argv.insert(sp.argv.end(), req.worker_argv.begin(), req.worker_argv.end());
    sp.argv.insert(sp.argv.end(),
                   {"--connect", host + ":" + std::to_string(port), "--secret", secret, "--world", std::to_string(req.world)});
    sp.env_set = env;
    if (getuid() == 0) {  // OpenMPI refuses root unless told twice
      sp.env_set.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
      sp.env_set.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    sp.process_group = 0;
    sp.log_file = log_;
    sp.limits = req.limits;
    pid_ = spawn(sp).pid;
    accept_all(secret, o.connect_timeout);
  }

 private:
  void accept_all(const std::string& secret, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    int joined = 0;
    while (joined < world()) {
      if (poll_exit(0))
        fail(Errc::io_error, "the launcher exited (" + exit_->describe() + ") after " + std::to_string(joined) + " of " +
                                 std::to_string(world()) + " workers joined; see " + log_.string());
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        fail(Errc::timeout, std::to_string(joined) + " of " + std::to_string(world()) + " workers joined within " +
                                std::to_string(timeout.count() / 1000) + " s; see " + log_.string());
      int fd = tcp_accept(listen_fd_, std::min(left, std::chrono::milliseconds(200)));
      if (fd < 0) continue;
      timeval tv{10, 0};  // a stranger that connects and says nothing must not stall the job
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::optional<Message> m;
      try {
        m = recv_message(fd);
      } catch (const Error&) {
        m.reset();
      }
      int rank = m && m->kind == MsgKind::join && m->body.value("secret", "") == secret ? m->body.value("rank", -1) : -1;
      if (rank < 0 || rank >= world() || fds_[rank] >= 0) {
        close(fd);  // not ours, or a rank twice: ignore it
        continue;
      }
      timeval none{0, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
      fds_[rank] = fd;
      ++joined;
    }
  }

  std::filesystem::path log_;
  std::vector<int> fds_;
  int listen_fd_ = -1;
  pid_t pid_ = -1;
  std::optional<ExitInfo> exit_;
};

}  // namespace

std::unique_ptr<Job> MpiLauncher::launch(const LaunchRequest& req) {
  if (req.world < 1) fail(Errc::invalid_argument, "a job needs at least one rank");
  std::filesystem::create_directories(req.log_dir);
  auto job = std::make_unique<MpiJob>(req.world, req.log_dir / "launcher.log");
  job->start(req, opts_);
  return job;
}

}  // namespace pkb
