#include "proto/tcp.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.hpp"

namespace pkb {

int tcp_listen(const std::string& bind_address, int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(Errc::io_error, std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (inet_pton(AF_INET, bind_address.c_str(), &a.sin_addr) != 1) {
    close(fd);
    fail(Errc::invalid_argument, "not an IPv4 address: '" + bind_address + "'");
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    fail(Errc::io_error, "cannot listen on " + bind_address + ": " + std::strerror(e));
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int tcp_accept(int listen_fd, std::chrono::milliseconds timeout) {
  pollfd p{listen_fd, POLLIN, 0};
  int n = poll(&p, 1, static_cast<int>(timeout.count()));
  if (n <= 0) return -1;
  int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) fail(Errc::io_error, std::string("accept: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int tcp_connect(const std::string& host, int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no attempt";
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc == 0 && res) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        freeaddrinfo(res);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      last = std::strerror(errno);
      if (fd >= 0) close(fd);
      freeaddrinfo(res);
    } else {
      last = gai_strerror(rc);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail(Errc::io_error, "cannot connect to " + host + ":" + std::to_string(port) + ": " + last);
}

std::pair<std::string, int> split_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) fail(Errc::invalid_argument, "expected HOST:PORT, not '" + s + "'");
  try {
    int port = std::stoi(s.substr(colon + 1));
    if (port <= 0 || port > 65535) throw std::out_of_range("port");
    return {s.substr(0, colon), port};
  } catch (const std::exception&) {
    fail(Errc::invalid_argument, "bad port in '" + s + "'");
  }
}

}  // namespace pkb
