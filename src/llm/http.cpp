#include "llm/http.hpp"

#include <curl/curl.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/strings.hpp"

namespace pkb {

namespace {

constexpr size_t kMaxBody = 64u << 20;  // a reply larger than this is not a chat completion

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) fail(Errc::internal, "curl_global_init failed");
  });
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

void append(Slist& list, const std::string& header) {
  curl_slist* head = curl_slist_append(list.get(), header.c_str());  // the same head, or a new one
  if (!head) fail(Errc::internal, "out of memory building HTTP headers");
  (void)list.release();
  list.reset(head);
}

struct Sink {
  std::string body;
  std::optional<std::string> retry_after;
  bool overflow = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  if (s->body.size() + size * n > kMaxBody) {
    s->overflow = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  s->body.append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  std::string_view line(data, size * n);
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(trim(line.substr(0, colon)));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "retry-after") static_cast<Sink*>(user)->retry_after = std::string(trim(line.substr(colon + 1)));
  }
  return size * n;
}

// Ctrl-C: returning non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return interrupted() ? 1 : 0; }

}  // namespace

struct CurlTransport::Handle {
  CURL* curl = nullptr;
  ~Handle() {
    if (curl) curl_easy_cleanup(curl);
  }
};

CurlTransport::CurlTransport() : h_(std::make_unique<Handle>()) {
  global_init();
  h_->curl = curl_easy_init();
  if (!h_->curl) fail(Errc::internal, "curl_easy_init failed");
}

CurlTransport::~CurlTransport() = default;

HttpResponse CurlTransport::post(const HttpRequest& req) {
  CURL* c = h_->curl;
  curl_easy_reset(c);  // keeps the connection cache, drops the previous request's options
  Slist headers;
  // "Expect:" stops curl from waiting for "100 Continue" before sending a large prompt.
  append(headers, "Content-Type: application/json");
  append(headers, "Expect:");
  for (const auto& h : req.headers) append(headers, h);
  Sink sink;
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based DNS timeouts
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // whatever curl can decode
  curl_easy_setopt(c, CURLOPT_USERAGENT, "pkb-generate/1");
  // A proxy from the environment must not capture a local endpoint (vLLM, llama.cpp, tests).
  std::string no_proxy = "localhost,127.0.0.1,::1";
  for (const char* var : {"NO_PROXY", "no_proxy"})
    if (const char* v = std::getenv(var); v && *v) no_proxy += std::string(",") + v;
  curl_easy_setopt(c, CURLOPT_NOPROXY, no_proxy.c_str());

  auto t0 = std::chrono::steady_clock::now();
  CURLcode rc = curl_easy_perform(c);
  HttpResponse r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc == CURLE_ABORTED_BY_CALLBACK) throw Interrupted();
  r.body = std::move(sink.body);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    r.outcome = HttpOutcome::timeout;
    r.error = std::string("no complete reply within ") + std::to_string(static_cast<int>(req.timeout_s)) + " s";
    return r;
  }
  if (rc != CURLE_OK) {
    r.outcome = HttpOutcome::network_error;
    r.error = sink.overflow ? "the reply is larger than 64 MiB" : std::string(curl_easy_strerror(rc));
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
  if (sink.retry_after) r.retry_after_s = parse_retry_after(*sink.retry_after, std::time(nullptr));
  return r;
}

std::optional<double> parse_retry_after(std::string_view value, std::time_t now) {
  value = trim(value);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789.") == std::string_view::npos) {
    try {
      return std::max(0.0, std::stod(std::string(value)));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::time_t at = curl_getdate(std::string(value).c_str(), &now);
  if (at < 0) return std::nullopt;
  return std::max(0.0, static_cast<double>(at - now));
}

}  // namespace pkb
