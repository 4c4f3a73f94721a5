// A job's own network namespace: loopback only. Workers placed in it can reach each other (NCCL's
// bootstrap and socket transport, its unix sockets for peer handles) and nothing else: no other
// job, no service of the host, no network. Making one needs CAP_SYS_ADMIN (a root driver); the
// namespace lives as long as this object's descriptor (and any process inside it).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pkb {

class NetworkNamespace {
 public:
  /// A new namespace with `lo` up; throws Error(io_error) saying why it cannot be made.
  static std::unique_ptr<NetworkNamespace> create();
  ~NetworkNamespace();
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  /// A descriptor of the namespace (/proc/.../ns/net), for setns(2) in a child before exec.
  int fd() const { return fd_; }
  /// Runs `f` on a thread inside the namespace and returns its result (sockets it opens, and
  /// threads it starts, stay there); rethrows what `f` throws.
  std::string run_inside(const std::function<std::string()>& f) const;

 private:
  explicit NetworkNamespace(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// The names of the network interfaces this process sees (getifaddrs), each once.
std::vector<std::string> network_interfaces();

}  // namespace pkb
