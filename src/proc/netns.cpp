#include "proc/netns.hpp"

#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace pkb {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

/// Brings `lo` up in the calling thread's namespace.
void loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail(Errc::io_error, errno_text("socket"));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    ok = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  }
  int err = errno;
  ::close(s);
  errno = err;
  if (!ok) fail(Errc::io_error, errno_text("bringing lo up"));
}

}  // namespace

std::unique_ptr<NetworkNamespace> NetworkNamespace::create() {
  // unshare(CLONE_NEWNET) moves only the calling thread: do it on a thread of its own, keep a
  // descriptor of the namespace, and let the thread end.
  int fd = -1;
  std::string error;
  std::thread t([&] {
    try {
      if (::unshare(CLONE_NEWNET) != 0) fail(Errc::io_error, errno_text("unshare(CLONE_NEWNET)"));
      loopback_up();
      fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      if (fd < 0) fail(Errc::io_error, errno_text("open /proc/thread-self/ns/net"));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  if (!error.empty()) {
    if (fd >= 0) ::close(fd);
    fail(Errc::io_error, "cannot make the job's network namespace: " + error);
  }
  return std::unique_ptr<NetworkNamespace>(new NetworkNamespace(fd));
}

NetworkNamespace::~NetworkNamespace() {
  if (fd_ >= 0) ::close(fd_);
}

std::string NetworkNamespace::run_inside(const std::function<std::string()>& f) const {
  std::string out;
  std::exception_ptr error;
  std::thread t([&] {
    try {
      if (::setns(fd_, CLONE_NEWNET) != 0) fail(Errc::io_error, errno_text("setns into the job's network namespace"));
      out = f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

std::vector<std::string> network_interfaces() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) fail(Errc::io_error, errno_text("getifaddrs"));
  for (ifaddrs* a = list; a; a = a->ifa_next)
    if (a->ifa_name && std::find(out.begin(), out.end(), a->ifa_name) == out.end()) out.emplace_back(a->ifa_name);
  ::freeifaddrs(list);
  return out;
}

}  // namespace pkb
