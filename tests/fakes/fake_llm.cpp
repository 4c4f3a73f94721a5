#include "fake_llm.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <stdexcept>

namespace pkb::fake {

using nlohmann::json;

namespace {

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

void send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away (e.g. it timed out): nothing to do
    off += static_cast<size_t>(n);
  }
}

/// Reads until `pred(buffer)` holds, the peer closes, or 10 s pass (bounded: a test never hangs here).
template <typename Pred>
bool read_until(int fd, std::string& buf, Pred pred) {
  auto deadline = now_ms() + 10000;
  char chunk[16384];
  while (!pred(buf)) {
    pollfd p{fd, POLLIN, 0};
    long long left = deadline - now_ms();
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 200))) < 0) return false;
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
  return true;
}

std::optional<Request> read_request(int fd) {
  std::string buf;
  if (!read_until(fd, buf, [](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; })) return std::nullopt;
  size_t head_end = buf.find("\r\n\r\n");
  Request req;
  size_t line_end = buf.find("\r\n");
  std::string first = buf.substr(0, line_end);
  size_t sp1 = first.find(' '), sp2 = first.rfind(' ');
  if (sp1 == std::string::npos || sp2 <= sp1) return std::nullopt;
  req.method = first.substr(0, sp1);
  req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
  for (size_t pos = line_end + 2; pos < head_end;) {
    size_t eol = buf.find("\r\n", pos);
    std::string line = buf.substr(pos, eol - pos);
    pos = eol + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = line.find_first_not_of(' ', colon + 1);
    req.headers[name] = v == std::string::npos ? "" : line.substr(v);
  }
  if (req.headers.count("expect")) send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
  size_t length = req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
  size_t body_start = head_end + 4;
  if (!read_until(fd, buf, [&](const std::string& b) { return b.size() >= body_start + length; })) return std::nullopt;
  req.body = buf.substr(body_start, length);
  return req;
}

}  // namespace

Reply Reply::answer(std::string text) {
  Reply r;
  r.text = std::move(text);
  return r;
}

Reply Reply::code(const std::string& code, const std::string& strategy) {
  return answer(strategy + "\n\n```cu\n" + code + (code.empty() || code.back() == '\n' ? "" : "\n") + "```\n");
}

Reply Reply::error(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

Reply Reply::raw(std::string body) {
  Reply r;
  r.body = std::move(body);
  return r;
}

std::string protocol_body(const Request& req, const std::string& text) {
  long long in = static_cast<long long>(req.body.size() / 4), out = static_cast<long long>(text.size() / 4);
  std::string model;
  try {
    model = req.json().value("model", "");
  } catch (const std::exception&) {
  }
  if (ends_with(req.path, "/chat/completions"))
    return json{{"id", "fake-1"},
                {"object", "chat.completion"},
                {"model", model.empty() ? "fake" : model},
                {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}}, {"finish_reason", "stop"}}}},
                {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out}}}}
        .dump();
  if (ends_with(req.path, "/messages"))
    return json{{"id", "msg_fake"},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model.empty() ? "fake" : model},
                {"content", {{{"type", "text"}, {"text", text}}}},
                {"stop_reason", "end_turn"},
                {"usage", {{"input_tokens", in}, {"output_tokens", out}}}}
        .dump();
  if (req.path.find(":generateContent") != std::string::npos)
    return json{{"candidates", {{{"content", {{"role", "model"}, {"parts", {{{"text", text}}}}}}, {"finishReason", "STOP"}}}},
                {"usageMetadata", {{"promptTokenCount", in}, {"candidatesTokenCount", out}}},
                {"modelVersion", "fake-gemini"}}
        .dump();
  return json{{"error", {{"message", "fake server: no protocol at " + req.path}}}}.dump();
}

FakeLlmServer::FakeLlmServer(std::vector<Reply> script, Options opts)
    : FakeLlmServer(
          [script = std::move(script)](const Request&, int i) {
            if (script.empty()) return Reply::error(500, R"({"error":{"message":"fake server: empty script"}})");
            return script[std::min<size_t>(static_cast<size_t>(i), script.size() - 1)];
          },
          opts) {}

FakeLlmServer::FakeLlmServer(Responder responder, Options opts) : responder_(std::move(responder)), opts_(opts) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("fake llm: socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(opts_.port));
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("fake llm: cannot listen on 127.0.0.1:" + std::to_string(opts_.port));
  }
  port_ = ntohs(addr.sin_port);
  last_activity_ms_ = now_ms();
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeLlmServer::~FakeLlmServer() {
  stop();
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<Connection> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns.swap(connections_);
  }
  for (auto& c : conns) c.thread.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FakeLlmServer::stop() { stopped_ = true; }

std::string FakeLlmServer::url(const std::string& suffix) const { return "http://127.0.0.1:" + std::to_string(port_) + suffix; }

std::vector<Request> FakeLlmServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeLlmServer::accept_loop() {
  while (!stopped_) {
    if (now_ms() - last_activity_ms_ > static_cast<long long>(opts_.idle_exit_s * 1000)) {
      stopped_ = true;  // nobody has called for a while: stop by ourselves
      break;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0 || !(p.revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    last_activity_ms_ = now_ms();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {  // reap finished connections
      if (it->done->load()) {
        it->thread.join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    connections_.push_back({std::thread([this, fd, done] {
                              serve(fd);
                              ::close(fd);
                              *done = true;
                            }),
                            done});
  }
}

void FakeLlmServer::serve(int fd) {
  auto req = read_request(fd);
  if (!req) return;
  int index = next_index_++;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*req);
  }
  Reply r = responder_(*req, index);
  for (long long until = now_ms() + r.delay_ms; now_ms() < until && !stopped_;)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string body = r.text ? protocol_body(*req, *r.text) : r.body;
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n";
  for (auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
  send_all(fd, head + "\r\n" + body);
  last_activity_ms_ = now_ms();
}

}  // namespace pkb::fake
