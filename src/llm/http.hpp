// HTTPS POST for the LLM clients, behind a small interface so that the retry logic does not care
// how bytes travel. CurlTransport is the real one (libcurl, one easy handle per transport, reused
// for keep-alive); it is not thread-safe: give each thread its own.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;  // sent as application/json
  double timeout_s = 600;  // the whole exchange
  double connect_timeout_s = 30;
};

enum class HttpOutcome {
  completed,  // a response arrived (any status code)
  timeout,  // no complete response within timeout_s
  network_error,  // could not connect, connection reset, TLS failure, ...
};

struct HttpResponse {
  HttpOutcome outcome = HttpOutcome::completed;
  long code = 0;  // HTTP status code (completed only)
  std::string body;
  std::optional<double> retry_after_s;  // the Retry-After header, in seconds
  std::string error;  // what went wrong, for timeout and network_error
  double seconds = 0;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  /// POSTs `req`. Throws Interrupted when Ctrl-C arrives during the exchange; every other failure
  /// is an outcome in the response.
  virtual HttpResponse post(const HttpRequest& req) = 0;
};

class CurlTransport final : public HttpTransport {
 public:
  CurlTransport();
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;
  HttpResponse post(const HttpRequest& req) override;

 private:
  struct Handle;
  std::unique_ptr<Handle> h_;
};

/// A Retry-After value in seconds: either delta-seconds ("30") or an HTTP date, relative to `now`.
/// nullopt when it is neither; never negative.
std::optional<double> parse_retry_after(std::string_view value, std::time_t now);

}  // namespace pkb
