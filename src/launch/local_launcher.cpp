#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "launch/cgroup.hpp"
#include "launch/launcher.hpp"

namespace pkb {

std::vector<std::pair<std::string, std::string>> forced_worker_env() {
  return {{"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}};
}

std::string tail_of_file(const std::filesystem::path& p, size_t max_bytes) {
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(start);
  std::string out(static_cast<size_t>(size - start), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

namespace {

class LocalJob : public Job {
 public:
  LocalJob(int world, std::filesystem::path log_dir) : log_dir_(std::move(log_dir)) {
    pids_.assign(world, -1);
    fds_.assign(world, -1);
    exits_.resize(world);
  }
  ~LocalJob() override {
    // NCCL unlinks its segments when every rank exits cleanly; only a killed or failed job leaves
    // any, and cleaning up after a clean one could only hit other jobs' segments.
    bool clean = true;
    for (int r = 0; r < world(); ++r) clean &= pids_[r] <= 0 || (exits_[r] && exits_[r]->exited && exits_[r]->code == 0);
    kill();
    wait_all(Clock::now() + std::chrono::seconds(10));
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    cgroup_.reset();  // kills any straggler, removes the cgroup
    if (!clean) clean_shm();
  }

  std::string containment() const override { return cgroup_ ? cgroup_->kind() : "process-group"; }
  std::string sandbox() const override { return sandbox_; }

  std::vector<pid_t> leftovers() override {
    if (cgroup_) return cgroup_->members();
    return processes_in_group(pgid_);  // without a cgroup: whatever is still in the job's process group
  }

  int world() const override { return static_cast<int>(pids_.size()); }
  int channel(int rank) const override { return fds_.at(rank); }
  std::filesystem::path log_path(int rank) const override { return log_dir_ / ("rank_" + std::to_string(rank) + ".log"); }

  std::optional<ExitInfo> poll_exit(int rank) override {
    if (exits_[rank]) return exits_[rank];
    if (pids_[rank] <= 0) return ExitInfo{true, 0, 0};
    exits_[rank] = try_reap(pids_[rank]);
    return exits_[rank];
  }

  void kill() override {
    if (cgroup_) cgroup_->kill_all();
    if (pgid_ > 0) kill_group(pgid_, SIGKILL);
    for (int r = 0; r < world(); ++r)
      if (pids_[r] > 0 && !exits_[r]) ::kill(pids_[r], SIGKILL);
  }

  bool wait_all(Clock::time_point deadline) override {
    bool all = true;
    for (int r = 0; r < world(); ++r) {
      if (exits_[r] || pids_[r] <= 0) continue;
      exits_[r] = reap_until(pids_[r], deadline);
      all &= exits_[r].has_value();
    }
    return all;
  }

  /// Whom the workers run as (see LaunchRequest::sandbox_user).
  std::optional<SpawnOptions::Identity> choose_identity(const LaunchRequest& req) {
    if (req.sandbox_user.empty()) {
      sandbox_ = "not isolated: sandboxing is off (PKB_SANDBOX=off)";
      return std::nullopt;
    }
    if (geteuid() != 0) {
      sandbox_ = "not isolated: pkb is not root, so its workers run as its own user (uid " + std::to_string(geteuid()) +
                 ") and could write what it can";
      return std::nullopt;
    }
    struct passwd* pw = getpwnam(req.sandbox_user.c_str());
    if (!pw || pw->pw_uid == 0) {
      sandbox_ = "not isolated: no unprivileged user '" + req.sandbox_user + "' on this machine (PKB_SANDBOX_USER)";
      return std::nullopt;
    }
    SpawnOptions::Identity id{pw->pw_uid, pw->pw_gid};
    std::error_code ec;
    std::filesystem::create_directories(req.sandbox_home, ec);
    if (ec || chown(req.sandbox_home.c_str(), id.uid, id.gid) != 0 || chmod(req.sandbox_home.c_str(), 0700) != 0)
      fail(Errc::io_error, "cannot prepare the workers' home " + req.sandbox_home.string());
    sandbox_ = "user " + req.sandbox_user + " (uid " + std::to_string(id.uid) + "), no_new_privs";
    return id;
  }

  void start(const LaunchRequest& req) {
    shm_before_ = shm_entries();
    auto identity = choose_identity(req);
    if (req.use_cgroup && cgroups_enabled_by_env()) {
      static int counter = 0;
      std::string why;
      cgroup_ = JobCgroup::create("pkb-" + std::to_string(getpid()) + "-" + std::to_string(counter++),
                                  job_limits_from_env(req.world), &why);
    }
    for (int r = 0; r < req.world; ++r) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        fail(Errc::io_error, std::string("socketpair: ") + std::strerror(errno));
      fds_[r] = sv[0];
      SpawnOptions o;
      o.argv = req.worker_argv;
      o.argv.insert(o.argv.end(), {"--control-fd", "3", "--rank", std::to_string(r), "--world", std::to_string(req.world)});
      o.env_set = req.env;
      for (auto& kv : forced_worker_env()) o.env_set.push_back(kv);
      o.no_new_privs = true;
      if (identity) {
        o.run_as = identity;
        o.cwd = req.sandbox_home;
        o.env_set.emplace_back("HOME", req.sandbox_home.string());  // CUDA's JIT cache and the like
      }
      if (req.netns_fd >= 0) {
        o.netns_fd = req.netns_fd;
        o.env_set.emplace_back("NCCL_SOCKET_IFNAME", "lo");  // the namespace has nothing else
      }
      o.process_group = pgid_ > 0 ? pgid_ : 0;
      o.fd_map = {{sv[1], 3}};
      o.log_file = log_path(r);
      o.limits = req.limits;
      if (cgroup_) o.cgroup_procs = cgroup_->procs_files();
      try {
        Spawned s = spawn(o);
        pids_[r] = s.pid;
        if (pgid_ <= 0) pgid_ = s.pid;
      } catch (...) {
        close(sv[1]);
        throw;
      }
      close(sv[1]);
    }
  }

 private:
  static std::vector<std::string> shm_entries() {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) out.push_back(e.path().filename().string());
    return out;
  }

  /// The /dev/shm names that live processes have mapped (those whose maps can be read: all of them
  /// for root, the user's own otherwise).
  static std::vector<std::string> shm_in_use() {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream maps(e.path() / "maps");
      std::string line;
      while (std::getline(maps, line)) {
        auto at = line.find("/dev/shm/");
        if (at != std::string::npos) out.push_back(line.substr(at + 9));
      }
      // Open but not yet mapped (a segment between its creation and its mmap).
      std::error_code fec;
      for (auto& fd : std::filesystem::directory_iterator(e.path() / "fd", fec)) {
        std::error_code lec;
        std::string target = std::filesystem::read_symlink(fd.path(), lec).string();
        if (!lec && target.rfind("/dev/shm/", 0) == 0) out.push_back(target.substr(9));
      }
    }
    return out;
  }

  /// NCCL's shared-memory segments outlive processes that were killed: remove the ones this job
  /// created — new since it started, named nccl-*, and mapped by no live process. (Once this job's
  /// processes are gone, a new segment still mapped belongs to another job running beside this one;
  /// removing it broke that job's NCCL with "unhandled system error".)
  void clean_shm() {
    std::error_code ec;
    std::vector<std::string> in_use = shm_in_use();
    for (auto& name : shm_entries())
      if (name.rfind("nccl", 0) == 0 && std::find(shm_before_.begin(), shm_before_.end(), name) == shm_before_.end() &&
          std::find(in_use.begin(), in_use.end(), name) == in_use.end())
        std::filesystem::remove(std::filesystem::path("/dev/shm") / name, ec);
  }

  std::filesystem::path log_dir_;
  std::string sandbox_;
  std::unique_ptr<JobCgroup> cgroup_;
  std::vector<std::string> shm_before_;
  std::vector<pid_t> pids_;
  std::vector<int> fds_;
  std::vector<std::optional<ExitInfo>> exits_;
  pid_t pgid_ = -1;
};

}  // namespace

std::unique_ptr<Job> LocalLauncher::launch(const LaunchRequest& req) {
  if (req.world < 1) fail(Errc::invalid_argument, "a job needs at least one rank");
  std::filesystem::create_directories(req.log_dir);
  auto job = std::make_unique<LocalJob>(req.world, req.log_dir);
  job->start(req);  // on failure the destructor kills what already started
  return job;
}

}  // namespace pkb
