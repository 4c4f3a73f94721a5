// The control channel between the driver and its workers: framed messages over a stream socket.
//
// Frame: magic "PKB1" (u32) | kind (u32) | body length (u64) | blob length (u64) | body (JSON) | blob.
// The body carries structure; the blob carries bulk data (output tensors, samples) without
// re-encoding. A worker runs untrusted code in its process, so the driver treats everything it
// receives as input to validate: bounded lengths, expected kinds, checked fields.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

enum class MsgKind : uint32_t {
  plan = 1,  // driver -> worker: everything the job needs
  hello,  // worker -> driver: device and library facts
  phase,  // worker -> driver: entering a phase (for deadlines and progress)
  trial,  // worker -> driver: one correctness trial's outputs and checks (blob: output bytes)
  timing,  // worker -> driver: timed iterations (blob: sampled output values)
  error,  // worker -> driver: a failure with status and message; the worker exits after it
  done,  // worker -> driver: all work finished, teardown follows
  join,  // worker -> driver, over TCP only: the job's secret and the worker's rank, first
  call,  // worker -> driver: timed call i ran (its time and output fingerprints, committed); i = -1: ready
  grant,  // driver -> worker: call i's sample key and full-check flag, call i+1's seed
  op,  // checker -> runner (the two processes of one rank): what to do next
  reply,  // runner -> checker: what it did
  profile,  // worker -> driver: the profiled calls' GPU activity of one step (--profile), or why there is none
};

std::string_view to_string(MsgKind k);

struct Message {
  MsgKind kind = MsgKind::done;
  nlohmann::json body = nlohmann::json::object();
  std::string blob;
};

inline constexpr uint32_t kFrameMagic = 0x31424B50;  // "PKB1"
inline constexpr uint64_t kMaxBodyBytes = 64ull << 20;
inline constexpr uint64_t kMaxBlobBytes = 64ull << 30;

/// Blocking write of one message; throws Error(io_error) if the peer is gone.
void send_message(int fd, const Message& m);

/// Blocking read of one message; nullopt on a clean end of stream; throws on a malformed frame.
std::optional<Message> recv_message(int fd);

/// Passes open file descriptors over a Unix socket (SCM_RIGHTS, with one byte of payload), between
/// two messages: the receiver calls recv_fds right after the message that announced them.
void send_fds(int sock, const std::vector<int>& fds);
std::vector<int> recv_fds(int sock, size_t count);

/// Waits until `fd` is readable or the process behind `pidfd` has exited (pidfd < 0: only `fd`).
/// True: readable. A child's exit must end the wait even where processes it forked keep the
/// socket open.
bool wait_readable_or_exit(int fd, int pidfd);

/// Incremental decoder for non-blocking readers (the driver polls many workers at once).
class FrameDecoder {
 public:
  /// Appends received bytes; throws Error(protocol_error) on a malformed frame.
  void feed(const char* data, size_t n);
  /// The next complete message, if one has arrived.
  std::optional<Message> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace pkb
