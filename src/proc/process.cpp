#include "proc/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/error.hpp"
#include "core/interrupt.hpp"

extern char** environ;

namespace pkb {

namespace {

void set_limit(int resource, long value) {
  if (value <= 0) return;
  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(value);
  setrlimit(resource, &rl);
}

[[noreturn]] void child_fail(int err_pipe, const char* what) {
  int e = errno;
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "%s: %s", what, std::strerror(e));
  if (n > 0) (void)!write(err_pipe, buf, static_cast<size_t>(n));
  _exit(127);
}

}  // namespace

std::string ExitInfo::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  const char* name = strsignal(signal);
  return "signal " + std::to_string(signal) + " (" + (name ? name : "?") + ")";
}

Spawned spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) fail(Errc::internal, "spawn with an empty argv");
  if (opts.fd_map.size() > 16) fail(Errc::internal, "spawn maps at most 16 fds");
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) fail(Errc::io_error, std::string("pipe: ") + std::strerror(errno));
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (opts.capture_output) {
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
      fail(Errc::io_error, std::string("pipe: ") + std::strerror(errno));
  }
  // Build argv/env before fork: the child may only call async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    bool overridden = false;
    for (auto& [k, v] : opts.env_set) overridden |= s.compare(0, k.size() + 1, k + "=") == 0;
    if (!overridden) env_strings.push_back(std::move(s));
  }
  for (auto& [k, v] : opts.env_set) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = opts.argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string cwd = opts.cwd.string();
  std::string log = opts.log_file.string();
  std::vector<const char*> cgroup_files;
  for (auto& f : opts.cgroup_procs) cgroup_files.push_back(f.c_str());

  pid_t pid = fork();
  if (pid < 0) fail(Errc::io_error, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(status_pipe[0]);
    // Park the status pipe far above the fd numbers the child will use.
    int sp = fcntl(status_pipe[1], F_DUPFD_CLOEXEC, 1000);
    if (sp < 0) _exit(127);
    close(status_pipe[1]);
    if (opts.process_group >= 0 && setpgid(0, opts.process_group) != 0) child_fail(sp, "setpgid");
    for (const char* f : cgroup_files) {  // join the job's cgroup before anything else runs
      char num[24];
      int len = 0;
      for (long v = getpid(); v > 0; v /= 10) num[len++] = static_cast<char>('0' + v % 10);
      char text[24];
      for (int i = 0; i < len; ++i) text[i] = num[len - 1 - i];
      int fd = open(f, O_WRONLY);
      if (fd < 0 || write(fd, text, static_cast<size_t>(len)) != len) child_fail(sp, "join the job's cgroup");
      close(fd);
    }
    if (opts.netns_fd >= 0 && setns(opts.netns_fd, CLONE_NEWNET) != 0) child_fail(sp, "setns into the job's network namespace");
    // Restore default signal handling the driver may have changed.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (opts.capture_output) {
      dup2(out_pipe[1], 1);
      dup2(err_pipe[1], 2);
    } else if (!log.empty()) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd < 0) child_fail(sp, "open log file");
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, 0);
      close(devnull);
    }
    // Move mapped fds into place: first dup everything above the target range, then into place.
    int temp[16];
    size_t n_map = std::min<size_t>(opts.fd_map.size(), 16);
    for (size_t i = 0; i < n_map; ++i) {
      temp[i] = fcntl(opts.fd_map[i].first, F_DUPFD, 64);
      if (temp[i] < 0) child_fail(sp, "dup control fd");
    }
    for (size_t i = 0; i < n_map; ++i) {
      if (dup2(temp[i], opts.fd_map[i].second) < 0) child_fail(sp, "dup2 control fd");
      close(temp[i]);
    }
    // Close everything else beyond stdio and the mapped fds.
    int maxfd = 3;
    for (auto& [from, to] : opts.fd_map) maxfd = std::max(maxfd, to + 1);
    for (int fd = 3; fd < maxfd; ++fd) {
      bool keep = false;
      for (auto& [from, to] : opts.fd_map) keep |= fd == to;
      if (!keep) close(fd);
    }
    for (int fd = maxfd; fd < 4096; ++fd)
      if (fd != sp) close(fd);
    set_limit(RLIMIT_NPROC, opts.limits.max_processes);
    set_limit(RLIMIT_FSIZE, opts.limits.max_file_bytes);
    set_limit(RLIMIT_CPU, opts.limits.max_cpu_seconds);
    if (opts.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(sp, "prctl(PR_SET_NO_NEW_PRIVS)");
    if (opts.run_as) {
      if (setgroups(0, nullptr) != 0 || setgid(opts.run_as->gid) != 0 || setuid(opts.run_as->uid) != 0)
        child_fail(sp, "drop privileges (setgroups/setgid/setuid)");
      if (getuid() != opts.run_as->uid || geteuid() != opts.run_as->uid || setuid(0) == 0)
        child_fail(sp, "drop privileges (still privileged after setuid)");
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) child_fail(sp, "chdir");
    execvpe(argv[0], argv.data(), envp.data());
    child_fail(sp, "exec");
  }
  close(status_pipe[1]);
  if (opts.process_group >= 0) setpgid(pid, opts.process_group == 0 ? pid : opts.process_group);  // no race with exec
  char buf[256];
  ssize_t n;
  do n = read(status_pipe[0], buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  Spawned s;
  s.pid = pid;
  if (opts.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    s.out_fd = out_pipe[0];
    s.err_fd = err_pipe[0];
  }
  if (n > 0) {
    waitpid(pid, nullptr, 0);
    if (s.out_fd >= 0) close(s.out_fd);
    if (s.err_fd >= 0) close(s.err_fd);
    fail(Errc::io_error, "cannot start " + opts.argv[0] + ": " + std::string(buf, static_cast<size_t>(n)));
  }
  return s;
}

namespace {
ExitInfo decode(int status) {
  ExitInfo e;
  if (WIFEXITED(status)) {
    e.exited = true;
    e.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  }
  return e;
}
}  // namespace

std::optional<ExitInfo> try_reap(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return decode(status);
  if (r < 0 && errno == ECHILD) return ExitInfo{true, 0, 0};  // already reaped elsewhere
  return std::nullopt;
}

std::optional<ExitInfo> reap_until(pid_t pid, Clock::time_point deadline) {
  while (true) {
    if (auto e = try_reap(pid)) return e;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void kill_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

std::vector<pid_t> processes_in_group(pid_t pgid) {
  std::vector<pid_t> out;
  if (pgid <= 0) return out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (getpgid(pid) == pgid) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> descendants(pid_t root) {
  // One pass over /proc gives every live process's parent; then a walk down from root.
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // gone since the listing
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
    auto paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 1));
    char state = 0;
    pid_t ppid = 0;
    if (!(rest >> state >> ppid) || state == 'Z' || state == 'X') continue;
    children[ppid].push_back(static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto it = children.find(p);
    if (it == children.end()) continue;
    for (pid_t c : it->second) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool become_child_subreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

int reap_exited_children() {
  int n = 0;
  int status = 0;
  while (waitpid(-1, &status, WNOHANG) > 0) ++n;
  return n;
}

CommandResult run_command(const SpawnOptions& in, std::chrono::milliseconds timeout, size_t max_output) {
  SpawnOptions opts = in;
  opts.capture_output = true;
  opts.process_group = 0;
  auto start = Clock::now();
  Spawned s = spawn(opts);
  CommandResult res;
  auto deadline = start + timeout;
  std::string* bufs[2] = {&res.out, &res.err};
  int fds[2] = {s.out_fd, s.err_fd};
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (interrupted()) {
      kill_group(s.pid);
      for (int fd : fds)
        if (fd >= 0) close(fd);
      reap_until(s.pid, Clock::now() + std::chrono::seconds(5));
      throw Interrupted();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      res.timed_out = true;
      break;
    }
    pollfd p[2];
    int n = 0;
    int idx[2];
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) {
        p[n] = {fds[i], POLLIN, 0};
        idx[n++] = i;
      }
    int r = poll(p, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    for (int k = 0; k < n; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = read(p[k].fd, buf, sizeof buf);
      if (got <= 0) {
        close(fds[idx[k]]);
        fds[idx[k]] = -1;
        continue;
      }
      std::string& b = *bufs[idx[k]];
      size_t room = max_output > b.size() ? max_output - b.size() : 0;
      b.append(buf, std::min(room, static_cast<size_t>(got)));
      if (static_cast<size_t>(got) > room) res.output_truncated = true;
    }
  }
  if (res.timed_out) kill_group(s.pid);
  for (int fd : fds)
    if (fd >= 0) close(fd);
  auto e = reap_until(s.pid, Clock::now() + std::chrono::seconds(10));
  if (!e) {
    kill_group(s.pid);
    e = reap_until(s.pid, Clock::now() + std::chrono::seconds(10));
  }
  // Children of the command (e.g. nvcc's cicc and ptxas) share its group: take them down too.
  kill_group(s.pid);
  res.exit = e.value_or(ExitInfo{false, 0, 9});
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return res;
}

std::optional<std::filesystem::path> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty()) {
      std::filesystem::path cand = std::filesystem::path(dir) / name;
      if (access(cand.c_str(), X_OK) == 0) return cand;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace pkb
