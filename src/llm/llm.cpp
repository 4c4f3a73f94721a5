// Statuses, configuration, API keys and the retry loop shared by every provider.
#include "llm/llm.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "core/interrupt.hpp"

namespace pkb {

using nlohmann::json;

std::string_view to_string(Provider p) {
  switch (p) {
    case Provider::openai: return "openai";
    case Provider::anthropic: return "anthropic";
    case Provider::gemini: return "gemini";
  }
  return "?";
}

std::optional<Provider> parse_provider(std::string_view s) {
  for (Provider p : {Provider::openai, Provider::anthropic, Provider::gemini})
    if (s == to_string(p)) return p;
  return std::nullopt;
}

namespace {
constexpr LlmStatus kAllStatuses[] = {LlmStatus::ok,
                                      LlmStatus::http_error,
                                      LlmStatus::rate_limited,
                                      LlmStatus::timeout,
                                      LlmStatus::network_error,
                                      LlmStatus::malformed_response,
                                      LlmStatus::no_code_block,
                                      LlmStatus::auth_missing};
}  // namespace

std::string_view to_string(LlmStatus s) {
  switch (s) {
    case LlmStatus::ok: return "ok";
    case LlmStatus::http_error: return "http_error";
    case LlmStatus::rate_limited: return "rate_limited";
    case LlmStatus::timeout: return "timeout";
    case LlmStatus::network_error: return "network_error";
    case LlmStatus::malformed_response: return "malformed_response";
    case LlmStatus::no_code_block: return "no_code_block";
    case LlmStatus::auth_missing: return "auth_missing";
  }
  return "?";
}

std::optional<LlmStatus> parse_llm_status(std::string_view s) {
  for (LlmStatus x : kAllStatuses)
    if (s == to_string(x)) return x;
  return std::nullopt;
}

std::string_view default_base_url(Provider p) {
  switch (p) {
    case Provider::openai: return "https://api.openai.com/v1";
    case Provider::anthropic: return "https://api.anthropic.com/v1";
    case Provider::gemini: return "https://generativelanguage.googleapis.com/v1beta";
  }
  return "";
}

std::vector<std::string> default_key_envs(Provider p) {
  switch (p) {
    case Provider::openai: return {"OPENAI_API_KEY"};
    case Provider::anthropic: return {"ANTHROPIC_API_KEY"};
    case Provider::gemini: return {"GEMINI_API_KEY", "GOOGLE_API_KEY"};
  }
  return {};
}

std::string LlmConfig::endpoint() const {
  std::string base = base_url.empty() ? std::string(default_base_url(provider)) : base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

json LlmConfig::parameters() const {
  return {{"temperature", temperature ? json(*temperature) : json(nullptr)},
          {"max_tokens", max_tokens},
          {"timeout_s", timeout_s},
          {"max_retries", max_retries}};
}

json to_json(const Usage& u) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {
      {"prompt_tokens", opt(u.prompt_tokens)}, {"completion_tokens", opt(u.completion_tokens)}, {"cost_usd", opt(u.cost_usd)}};
}

namespace {

/// The key, or why there is none. A key is required for the public endpoints and whenever a
/// variable was named explicitly; a local endpoint given by --base-url (vLLM, llama.cpp) may run
/// without one, and then no credential header is sent.
std::string find_key(const LlmConfig& cfg, std::string& problem) {
  std::vector<std::string> vars = cfg.api_key_env.empty() ? default_key_envs(cfg.provider) : std::vector{cfg.api_key_env};
  for (auto& v : vars)
    if (const char* k = std::getenv(v.c_str()); k && *k) return k;
  bool required = !cfg.api_key_env.empty() || cfg.base_url.empty();
  if (required) {
    std::string names;
    for (auto& v : vars) names += (names.empty() ? "" : " or ") + v;
    problem = "no API key: set " + names + " (or name another variable with --api-key-env)";
  }
  return "";
}

/// The endpoint's own error message if the body is JSON with one, else the body's start.
std::string excerpt(const std::string& body) {
  try {
    json j = json::parse(body);
    if (j.is_object() && j.contains("error")) {
      const json& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
      if (e.is_string()) return e.get<std::string>();
    }
  } catch (const json::exception&) {
  }
  return body.size() > 400 ? body.substr(0, 400) + " ..." : body;
}

/// Sleeps in short slices so that Ctrl-C is noticed within 50 ms.
void interruptible_sleep(double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    check_interrupted();
    std::this_thread::sleep_for(
        std::min<std::chrono::duration<double>>(until - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
  }
  check_interrupted();
}

}  // namespace

HttpChatModel::HttpChatModel(LlmConfig cfg, std::unique_ptr<HttpTransport> transport)
    : cfg_(std::move(cfg)), transport_(std::move(transport)), protocol_(make_protocol(cfg_.provider)) {
  key_ = find_key(cfg_, key_problem_);
}

double HttpChatModel::wait_before_retry(int attempt, const HttpResponse& r) const {
  if (r.retry_after_s) return std::min(*r.retry_after_s, cfg_.backoff_max_s);
  // Exponential backoff with up to 25% jitter, so that parallel samples do not retry in lockstep.
  thread_local std::mt19937 rng{std::random_device{}()};
  double jitter = std::uniform_real_distribution<double>(1.0, 1.25)(rng);
  return std::min(cfg_.backoff_s * std::pow(2.0, attempt - 1) * jitter, cfg_.backoff_max_s);
}

Completion HttpChatModel::complete(const Conversation& conv) {
  auto t0 = std::chrono::steady_clock::now();
  Completion c;
  auto done = [&](LlmStatus s, std::string message) {
    c.status = s;
    c.message = std::move(message);
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return c;
  };
  if (!key_problem_.empty()) return done(LlmStatus::auth_missing, key_problem_);
  std::string url = cfg_.endpoint();
  for (int retries = 0, adaptations = 0;;) {
    ++c.attempts;
    HttpResponse r = transport_->post(protocol_->request(conv, cfg_, key_));
    c.http_code = r.code;
    if (r.outcome == HttpOutcome::timeout)
      return done(LlmStatus::timeout, r.error + " from " + url + " (raise --llm-timeout for long replies)");
    if (r.outcome == HttpOutcome::completed && r.code == 200) {
      try {
        protocol_->parse(json::parse(r.body), c);
        return done(LlmStatus::ok, "");
      } catch (const std::exception& e) {  // json::exception or Error(parse_error)
        return done(LlmStatus::malformed_response, std::string("HTTP 200 but not a ") + std::string(to_string(cfg_.provider)) +
                                                       " reply: " + e.what() + "; body starts: " + r.body.substr(0, 200));
      }
    }
    if (r.outcome == HttpOutcome::completed && r.code == 400 && adaptations < 2 && protocol_->adapt(r.body)) {
      ++adaptations;  // resend in the form the endpoint asked for; not counted as a retry
      continue;
    }
    bool transient = r.outcome == HttpOutcome::network_error || r.code == 429 || r.code >= 500;
    if (transient && retries < cfg_.max_retries) {
      interruptible_sleep(wait_before_retry(++retries, r));
      continue;
    }
    std::string after = retries ? " after " + std::to_string(retries + 1) + " attempts" : "";
    if (r.outcome == HttpOutcome::network_error) return done(LlmStatus::network_error, r.error + " (" + url + ")" + after);
    if (r.code == 429) return done(LlmStatus::rate_limited, "HTTP 429 from " + url + after + ": " + excerpt(r.body));
    std::string hint = r.code == 401 || r.code == 403 ? " (check the API key and its variable)" : "";
    return done(LlmStatus::http_error, "HTTP " + std::to_string(r.code) + " from " + url + after + ": " + excerpt(r.body) + hint);
  }
}

std::unique_ptr<ChatModel> make_chat_model(const LlmConfig& cfg) {
  return std::make_unique<HttpChatModel>(cfg, std::make_unique<CurlTransport>());
}

}  // namespace pkb
