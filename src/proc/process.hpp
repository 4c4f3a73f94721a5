// Child processes: spawning into process groups, running a command with a deadline and captured
// output, and killing whole groups. Everything that starts a process goes through here.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pkb {

using Clock = std::chrono::steady_clock;

struct ResourceLimits {
  long max_processes = 0;  // RLIMIT_NPROC (0: unchanged)
  long max_file_bytes = 0;  // RLIMIT_FSIZE (0: unchanged)
  long max_cpu_seconds = 0;  // RLIMIT_CPU (0: unchanged)
};

struct SpawnOptions {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env_set;
  std::filesystem::path cwd;
  /// Process group: -1 keeps the parent's, 0 makes the child a new group leader, >0 joins it.
  pid_t process_group = 0;
  /// Parent fds to place at given child fd numbers (e.g. a socket at fd 3).
  std::vector<std::pair<int, int>> fd_map;
  /// Pipes to read the child's stdout and stderr (otherwise they are inherited).
  bool capture_output = false;
  /// Redirect stdout/stderr to this file (append), unless capture_output.
  std::filesystem::path log_file;
  ResourceLimits limits;
  /// cgroup.procs files the child writes its pid into before exec (see launch/cgroup.hpp).
  std::vector<std::string> cgroup_procs;
  /// Run the program as this user and group (no supplementary groups), after joining the cgroup:
  /// a privileged driver's workers are not privileged.
  struct Identity {
    uid_t uid = 0;
    gid_t gid = 0;
  };
  std::optional<Identity> run_as;
  /// prctl(PR_SET_NO_NEW_PRIVS): the program and its children can never gain privileges (setuid
  /// binaries and file capabilities stop working for them).
  bool no_new_privs = false;
  /// A network namespace (an open /proc/.../ns/net, proc/netns.hpp) the child enters before exec,
  /// while still privileged; -1: the parent's.
  int netns_fd = -1;
};

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // with capture_output
};

/// Forks and execs; throws Error(io_error) if the program cannot be started (the exec failure is
/// reported through a close-on-exec pipe, so a missing binary is an error here, not a crash later).
Spawned spawn(const SpawnOptions& opts);

struct ExitInfo {
  bool exited = false;  // normal exit (then code), else killed by signal
  int code = 0;
  int signal = 0;
  std::string describe() const;  // "exit code 1", "signal 11 (Segmentation fault)"
};

/// Non-blocking: the exit status if the child has ended.
std::optional<ExitInfo> try_reap(pid_t pid);
/// Blocks until the child ends or the deadline passes.
std::optional<ExitInfo> reap_until(pid_t pid, Clock::time_point deadline);

/// SIGKILL to a whole process group (ignores a group that is already gone).
void kill_group(pid_t pgid, int sig = 9);

/// Processes currently in process group `pgid` (read from /proc).
std::vector<pid_t> processes_in_group(pid_t pgid);

/// Every live descendant of `root`: its children, their children and so on, read from the parent
/// pids in /proc/<pid>/stat. Leaves out `root` itself and zombies (exited, not yet reaped). A
/// snapshot: a process that forks or exits while /proc is being read may be missed.
std::vector<pid_t> descendants(pid_t root);

/// Makes this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a descendant whose parent
/// dies is re-parented to this process, not to init, so it stays among descendants(getpid()). The
/// adopted processes are this process's children, to be reaped (reap_exited_children). False if
/// the kernel refused.
bool become_child_subreaper();

/// Reaps every child that has already exited (waitpid(-1, WNOHANG)); returns how many. Only where
/// no other wait is pending: it would take the status a waiting caller is about to read.
int reap_exited_children();

struct CommandResult {
  ExitInfo exit;
  bool timed_out = false;
  bool output_truncated = false;
  std::string out, err;
  double seconds = 0;
};

/// Runs a command to completion with a deadline (the whole process group is killed on expiry) and
/// keeps at most `max_output` bytes of each stream.
CommandResult run_command(const SpawnOptions& opts, std::chrono::milliseconds timeout, size_t max_output = 1 << 20);

/// Whether a program is on PATH (or is an existing path).
std::optional<std::filesystem::path> find_program(const std::string& name);

}  // namespace pkb
