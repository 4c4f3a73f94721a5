// A fake LLM endpoint for tests and demos: a tiny HTTP/1.1 server on 127.0.0.1 (ephemeral port by
// default) that answers the OpenAI, Anthropic and Gemini protocols with scripted replies. It runs
// in a background thread, records every request, and stops by itself when destroyed or after
// `idle_exit_s` without a request. `pkb-fake-llm` (fake_llm_main.cpp) wraps it in a program.
//
// The protocol of a reply is chosen by the request path:
//   .../chat/completions        OpenAI chat completion
//   .../messages                Anthropic message
//   .../models/<m>:generateContent   Gemini
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pkb::fake {

struct Request {
  std::string method, path;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

struct Reply {
  int status = 200;
  std::optional<std::string> text;  // the model's answer, wrapped in the request's protocol
  std::string body;  // sent as is when `text` is not set
  std::vector<std::pair<std::string, std::string>> headers;
  int delay_ms = 0;  // wait this long before answering

  /// A successful reply whose answer is `text`.
  static Reply answer(std::string text);
  /// An answer holding `code` in a ```cu block after a one-line strategy.
  static Reply code(const std::string& code, const std::string& strategy = "Strategy: a canned reply.");
  /// An error status with a body (JSON or not).
  static Reply error(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {});
  /// HTTP 200 with exactly this body (for malformed replies).
  static Reply raw(std::string body);
};

/// The JSON body of a successful reply with `text` in the protocol that `req.path` names; token
/// counts are body sizes / 4, so tests can predict them.
std::string protocol_body(const Request& req, const std::string& text);

class FakeLlmServer {
 public:
  using Responder = std::function<Reply(const Request& req, int index)>;
  struct Options {
    int port = 0;  // 0: an ephemeral port
    double idle_exit_s = 60;  // stop after this long without a request
  };

  /// Serves `script` in order; once it runs out the last reply repeats.
  explicit FakeLlmServer(std::vector<Reply> script, Options opts);
  explicit FakeLlmServer(std::vector<Reply> script) : FakeLlmServer(std::move(script), Options{}) {}
  /// Answers each request with responder(request, index).
  FakeLlmServer(Responder responder, Options opts);
  ~FakeLlmServer();
  FakeLlmServer(const FakeLlmServer&) = delete;
  FakeLlmServer& operator=(const FakeLlmServer&) = delete;

  int port() const { return port_; }
  /// "http://127.0.0.1:PORT" + suffix, e.g. url("/v1").
  std::string url(const std::string& suffix = "") const;
  /// Every request received so far, in arrival order.
  std::vector<Request> requests() const;
  /// False once the server has stopped (idle too long, or stop()).
  bool running() const { return !stopped_.load(); }
  void stop();

 private:
  void accept_loop();
  void serve(int fd);
  Responder responder_;
  Options opts_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
  std::atomic<int> next_index_{0};
  std::atomic<long long> last_activity_ms_{0};
  mutable std::mutex mu_;
  std::vector<Request> requests_;
  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Connection> connections_;  // finished ones are joined by the acceptor as it goes
  std::thread acceptor_;
};

}  // namespace pkb::fake
