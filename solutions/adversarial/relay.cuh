// A man in the middle of the channel of the solution's process, for the relay_* cases: what a
// solution can do to the frames its process (a rank's runner) exchanges with the rank's checker
// (operations in, replies out). The channel's descriptor is on the runner's command line (fd 3); the
// solution moves it aside, puts one end of a socket pair in its place and relays every frame between
// the two, letting the case rewrite or hold it on the way. The driver's channel is not in this
// process at all. Nothing here is pkb's code: the frame layout (magic "PKB1", kind, body length,
// blob length, JSON body, blob) is public (src/proto/channel.hpp).
#pragma once
#include <nlohmann/json.hpp>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace relay {

enum Kind : uint32_t { kOp = 11, kReply = 12 };

struct Frame {
  uint32_t kind = 0;
  nlohmann::json body;
  std::string blob;
};

/// Called for every frame on its way; `to_worker` tells the direction (true: an operation from the
/// checker to the runner). The hook may change the frame, or block (the frame waits with it).
using Hook = std::function<void(Frame&, bool to_worker)>;

namespace detail {
inline std::atomic<bool> forwarding{false};  // a frame from the worker is between read and written
inline int worker_end = -1;                 // the relay's end of the worker's channel

inline bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
inline bool write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t r = ::write(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
inline bool read_frame(int fd, Frame& f, bool from_worker) {
  unsigned char h[24];
  if (!read_all(fd, h, sizeof h)) return false;
  if (from_worker) forwarding = true;  // until the frame is written on
  uint64_t blen = 0, xlen = 0;
  std::memcpy(&f.kind, h + 4, 4);
  std::memcpy(&blen, h + 8, 8);
  std::memcpy(&xlen, h + 16, 8);
  std::string body(blen, '\0');
  f.blob.assign(xlen, '\0');
  if (!read_all(fd, body.data(), blen) || !read_all(fd, f.blob.data(), xlen)) return false;
  f.body = nlohmann::json::parse(body, nullptr, false);
  return true;
}
inline bool write_frame(int fd, const Frame& f) {
  std::string body = f.body.dump();
  unsigned char h[24];
  uint32_t magic = 0x31424B50;
  uint64_t blen = body.size(), xlen = f.blob.size();
  std::memcpy(h, &magic, 4);
  std::memcpy(h + 4, &f.kind, 4);
  std::memcpy(h + 8, &blen, 8);
  std::memcpy(h + 16, &xlen, 8);
  return write_all(fd, h, sizeof h) && write_all(fd, body.data(), body.size()) && write_all(fd, f.blob.data(), f.blob.size());
}
inline void pump(int from, int to, bool to_worker, Hook hook) {
  Frame f;
  while (true) {
    if (!read_frame(from, f, !to_worker)) {
      if (!to_worker) forwarding = false;
      return;
    }
    hook(f, to_worker);
    bool sent = write_frame(to, f);
    if (!to_worker) forwarding = false;
    if (!sent) return;
  }
}
}  // namespace detail

/// Puts the relay between the runner (which keeps using fd 3) and the checker. Call once, from
/// pkb_init; returns false if the channel could not be taken over.
inline bool install(Hook hook) {
  int driver = ::dup(3);
  int pair[2];
  if (driver < 0 || ::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return false;
  if (::dup2(pair[0], 3) < 0) return false;
  ::close(pair[0]);
  int worker = pair[1];
  detail::worker_end = worker;
  std::thread(detail::pump, driver, worker, true, hook).detach();
  std::thread(detail::pump, worker, driver, false, hook).detach();
  return true;
}

/// Waits (up to `limit`) until every frame the runner has written so far has reached the checker.
/// Call it from pkb_finalize: a runner that exits while the relay still holds part of a frame would
/// lose it (the checker would see a crash).
inline void drain(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    int queued = 0;
    if (detail::worker_end < 0 || ioctl(detail::worker_end, FIONREAD, &queued) != 0) return;
    if (queued == 0 && !detail::forwarding) return;
    usleep(1000);
  }
}

}  // namespace relay
