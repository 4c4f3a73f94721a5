// descendants() and the child subreaper on real processes (CPU only): a forked child is counted
// while it runs and not once killed; a grandchild is counted through its parent; an orphaned
// grandchild is counted where this process is a subreaper, and reaped here.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "proc/netns.hpp"
#include "proc/process.hpp"

namespace pkb {
namespace {

bool contains(const std::vector<pid_t>& v, pid_t p) { return std::find(v.begin(), v.end(), p) != v.end(); }

/// Forks a child that sleeps until killed.
pid_t fork_sleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

struct ShWithChild {
  pid_t pid = -1;  // sh, leading its own process group
  pid_t grandchild = -1;  // what sh started in the background ($!), written to fd 3
};

/// Runs `sh -c script` with a pipe at fd 3 and reads the pid the script writes there.
ShWithChild spawn_sh(const std::string& script) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.fd_map = {{fds[1], 3}};
  ShWithChild out;
  out.pid = spawn(o).pid;
  close(fds[1]);
  char buf[32] = {};
  if (read(fds[0], buf, sizeof buf - 1) > 0) out.grandchild = static_cast<pid_t>(std::atol(buf));
  close(fds[0]);
  return out;
}

/// Polls descendants(getpid()) for up to 5 s until `p` is (or is no longer) among them.
bool becomes(pid_t p, bool present) {
  for (int i = 0; i < 500; ++i) {
    if (contains(descendants(getpid()), p) == present) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Descendants, CountsASleepingChildUntilItIsKilled) {
  pid_t child = fork_sleeper();
  ASSERT_GT(child, 0);
  auto now = descendants(getpid());
  EXPECT_TRUE(contains(now, child));
  EXPECT_FALSE(contains(now, getpid())) << "the root is not its own descendant";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  // Killed but not yet reaped: a zombie, which is not counted.
  EXPECT_TRUE(becomes(child, false));
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(contains(descendants(getpid()), child));
}

TEST(Descendants, CountsGrandchildrenAndNotOtherProcesses) {
  // sh forks a sleeping grandchild and waits for it.
  auto sh = spawn_sh("sleep 30 3>&- & echo $! >&3; exec 3>&-; wait");
  auto now = descendants(getpid());
  EXPECT_TRUE(contains(now, sh.pid));
  EXPECT_TRUE(contains(now, sh.grandchild));
  EXPECT_FALSE(contains(descendants(sh.pid), sh.pid));
  EXPECT_TRUE(contains(descendants(sh.pid), sh.grandchild));
  EXPECT_FALSE(contains(now, getppid())) << "the test runner is above, not below";
  kill_group(sh.pid);  // sh leads its own group; the sleep is in it
  EXPECT_TRUE(reap_until(sh.pid, Clock::now() + std::chrono::seconds(5)).has_value());
  EXPECT_TRUE(becomes(sh.grandchild, false));
}

TEST(Descendants, ASubreaperAdoptsAnOrphanedGrandchild) {
  ASSERT_TRUE(become_child_subreaper());
  // sh starts a sleep in the background and exits at once: the sleep is orphaned.
  auto sh = spawn_sh("sleep 30 3>&- & echo $! >&3");
  ASSERT_TRUE(reap_until(sh.pid, Clock::now() + std::chrono::seconds(10)).has_value());
  // Re-parented here, not to init: still a descendant, now a child.
  EXPECT_TRUE(contains(descendants(getpid()), sh.grandchild));
  ASSERT_EQ(::kill(sh.grandchild, SIGKILL), 0);
  EXPECT_TRUE(becomes(sh.grandchild, false));
  // The adopted orphan is this process's child to reap (wait until its exit has been signalled).
  int reaped = 0;
  for (int i = 0; i < 500 && reaped == 0; ++i) {
    reaped = reap_exited_children();
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(reaped, 1);
  int status = 0;
  EXPECT_EQ(waitpid(sh.grandchild, &status, WNOHANG), -1) << "not reaped by reap_exited_children";
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace pkb

namespace pkb {
namespace {

// A job's network namespace: loopback only, and loopback there is not the host's (a TCP port the
// driver listens on is not reachable from inside); a spawned child lands in it. Needs root.
TEST(NetworkNamespace, HoldsLoopbackOnlyAndReachesNothingOfTheHost) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_SYS_ADMIN) to make a network namespace";
  auto ns = NetworkNamespace::create();
  EXPECT_EQ(ns->run_inside([] {
    std::string names;
    for (auto& n : network_interfaces()) names += (names.empty() ? "" : ",") + n;
    return names;
  }),
            "lo");
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto connect_to_it = [&] {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = ::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return std::string(ok ? "connected" : "refused");
  };
  EXPECT_EQ(connect_to_it(), "connected");  // the host's loopback, from here
  EXPECT_EQ(ns->run_inside(connect_to_it), "refused");
  ::close(listener);

  SpawnOptions o;
  o.argv = {"cat", "/proc/net/dev"};  // /proc/net is the reader's namespace
  o.netns_fd = ns->fd();
  auto r = run_command(o, std::chrono::seconds(10), 1 << 16);
  EXPECT_NE(r.out.find("lo:"), std::string::npos) << r.out;
  int interfaces = 0;
  for (char c : r.out) interfaces += c == ':';
  EXPECT_EQ(interfaces, 1) << r.out;  // the two header lines have no ':'
}

}  // namespace
}  // namespace pkb
