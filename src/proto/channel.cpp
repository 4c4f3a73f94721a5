#include "proto/channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace pkb {

std::string_view to_string(MsgKind k) {
  switch (k) {
    case MsgKind::plan: return "plan";
    case MsgKind::hello: return "hello";
    case MsgKind::phase: return "phase";
    case MsgKind::trial: return "trial";
    case MsgKind::timing: return "timing";
    case MsgKind::error: return "error";
    case MsgKind::done: return "done";
    case MsgKind::join: return "join";
    case MsgKind::call: return "call";
    case MsgKind::grant: return "grant";
    case MsgKind::op: return "op";
    case MsgKind::reply: return "reply";
    case MsgKind::profile: return "profile";
  }
  return "unknown";
}

namespace {

struct Header {
  uint32_t magic, kind;
  uint64_t body_len, blob_len;
};
static_assert(sizeof(Header) == 24);

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(Errc::io_error, std::string("control channel write: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

/// Reads exactly n bytes; false on EOF before the first byte; throws on EOF mid-way.
bool read_all(int fd, char* p, size_t n, bool at_frame_start) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(Errc::io_error, std::string("control channel read: ") + std::strerror(errno));
    }
    if (r == 0) {
      if (got == 0 && at_frame_start) return false;
      fail(Errc::protocol_error, "control channel closed in the middle of a message");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

void check_header(const Header& h) {
  if (h.magic != kFrameMagic) fail(Errc::protocol_error, "control channel: bad frame magic");
  if (h.kind < static_cast<uint32_t>(MsgKind::plan) || h.kind > static_cast<uint32_t>(MsgKind::profile))
    fail(Errc::protocol_error, "control channel: unknown message kind " + std::to_string(h.kind));
  if (h.body_len > kMaxBodyBytes) fail(Errc::protocol_error, "control channel: message body too large");
  if (h.blob_len > kMaxBlobBytes) fail(Errc::protocol_error, "control channel: message blob too large");
}

Message decode_body(const Header& h, std::string_view body, std::string blob) {
  Message m;
  m.kind = static_cast<MsgKind>(h.kind);
  try {
    m.body = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    fail(Errc::protocol_error, std::string("control channel: body is not JSON: ") + e.what());
  }
  if (!m.body.is_object()) fail(Errc::protocol_error, "control channel: body is not a JSON object");
  m.blob = std::move(blob);
  return m;
}

}  // namespace

void send_message(int fd, const Message& m) {
  std::string body = m.body.dump();
  Header h{kFrameMagic, static_cast<uint32_t>(m.kind), body.size(), m.blob.size()};
  write_all(fd, reinterpret_cast<const char*>(&h), sizeof h);
  write_all(fd, body.data(), body.size());
  write_all(fd, m.blob.data(), m.blob.size());
}

std::optional<Message> recv_message(int fd) {
  Header h;
  if (!read_all(fd, reinterpret_cast<char*>(&h), sizeof h, true)) return std::nullopt;
  check_header(h);
  std::string body(h.body_len, '\0'), blob(h.blob_len, '\0');
  read_all(fd, body.data(), body.size(), false);
  read_all(fd, blob.data(), blob.size(), false);
  return decode_body(h, body, std::move(blob));
}

void send_fds(int sock, const std::vector<int>& fds) {
  if (fds.empty()) return;
  char byte = 'F';
  iovec iov{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  while (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0)
    if (errno != EINTR) fail(Errc::io_error, std::string("passing descriptors: ") + std::strerror(errno));
}

std::vector<int> recv_fds(int sock, size_t count) {
  std::vector<int> fds;
  if (count == 0) return fds;
  char byte = 0;
  iovec iov{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * count), 0);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t r;
  while ((r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0)
    if (errno != EINTR) fail(Errc::io_error, std::string("receiving descriptors: ") + std::strerror(errno));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  if (r != 1 || byte != 'F' || fds.size() != count || (msg.msg_flags & MSG_CTRUNC)) {
    for (int fd : fds) ::close(fd);
    fail(Errc::protocol_error,
         "expected " + std::to_string(count) + " descriptors on the channel, got " + std::to_string(fds.size()));
  }
  return fds;
}

bool wait_readable_or_exit(int fd, int pidfd) {
  pollfd p[2] = {{fd, POLLIN, 0}, {pidfd, POLLIN, 0}};
  while (true) {
    int n = ::poll(p, pidfd >= 0 ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(Errc::io_error, std::string("poll: ") + std::strerror(errno));
    }
    if (p[0].revents) return true;  // data, or the end of the stream: recv_message tells which
    if (pidfd >= 0 && p[1].revents) return false;
  }
}

void FrameDecoder::feed(const char* data, size_t n) {
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {  // compact lazily: amortised O(1) per byte
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
}

std::optional<Message> FrameDecoder::next() {
  if (buffered() < sizeof(Header)) return std::nullopt;
  Header h;
  std::memcpy(&h, buf_.data() + pos_, sizeof h);
  check_header(h);
  size_t total = sizeof h + h.body_len + h.blob_len;
  if (buffered() < total) return std::nullopt;
  std::string_view body(buf_.data() + pos_ + sizeof h, h.body_len);
  std::string blob(buf_.data() + pos_ + sizeof h + h.body_len, h.blob_len);
  Message m = decode_body(h, body, std::move(blob));
  pos_ += total;
  return m;
}

}  // namespace pkb
