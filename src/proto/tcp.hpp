// TCP for control channels that cross hosts (jobs launched by mpirun/srun). Local jobs never open a
// port: they use socketpairs.
#pragma once
#include <chrono>
#include <string>

namespace pkb {

/// Listens on `bind_address` (IPv4 dotted, or "0.0.0.0") at an ephemeral port; returns the fd and
/// stores the port. Throws Error(io_error).
int tcp_listen(const std::string& bind_address, int* port);

/// Accepts one connection, waiting at most `timeout`; -1 on timeout. Throws Error(io_error).
int tcp_accept(int listen_fd, std::chrono::milliseconds timeout);

/// Connects to host:port (name or address), retrying until `timeout`. Throws Error(io_error).
int tcp_connect(const std::string& host, int port, std::chrono::milliseconds timeout);

/// "host:port" -> (host, port); throws Error(invalid_argument).
std::pair<std::string, int> split_host_port(const std::string& s);

}  // namespace pkb
