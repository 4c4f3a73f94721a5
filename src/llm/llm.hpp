// Chat models behind HTTP endpoints: OpenAI-compatible chat completions (OpenAI, Together, vLLM,
// llama.cpp server, OpenRouter), Anthropic Messages and Gemini generateContent. One request is one
// conversation; every outcome, failures included, is a Completion with a typed status.
//
// Retries: 429, 5xx and connection failures are retried with exponential backoff (Retry-After
// honoured, every wait capped), at most max_retries times. A timeout is not retried: a request
// that ran for the full --llm-timeout would most likely run that long again.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/http.hpp"

namespace pkb {

enum class Provider { openai, anthropic, gemini };
std::string_view to_string(Provider p);
std::optional<Provider> parse_provider(std::string_view s);

/// The outcome of one generation request (recorded in every sample and agent step).
enum class LlmStatus {
  ok,  // a reply arrived (and, for a sample, a code block was found in it)
  http_error,  // the endpoint answered with an error status (code and body excerpt in the message)
  rate_limited,  // still HTTP 429 after every retry
  timeout,  // no complete reply within the client timeout
  network_error,  // could not reach the endpoint (after every retry)
  malformed_response,  // HTTP 200 but not the JSON the protocol defines
  no_code_block,  // a reply without a usable code block (set by the code extraction)
  auth_missing,  // no API key in the environment; nothing was sent
};
std::string_view to_string(LlmStatus s);
std::optional<LlmStatus> parse_llm_status(std::string_view s);

struct LlmConfig {
  Provider provider = Provider::openai;
  std::string model;
  std::string base_url;  // empty: the provider's public endpoint (default_base_url)
  std::string api_key_env;  // empty: the provider's usual variables (default_key_envs)
  std::optional<double> temperature;  // nullopt: the endpoint's default (not sent)
  int max_tokens = 32768;
  double timeout_s = 900;
  int max_retries = 4;
  double backoff_s = 2;  // the first wait; it doubles with every retry
  double backoff_max_s = 120;  // no wait is longer, Retry-After included

  std::string endpoint() const;  // base_url or the default
  /// The parameters that shape a reply, for records.
  nlohmann::json parameters() const;
};

std::string_view default_base_url(Provider p);
std::vector<std::string> default_key_envs(Provider p);

struct ChatMessage {
  enum class Role { user, assistant };
  Role role = Role::user;
  std::string text;
};

struct Conversation {
  std::string system;
  std::vector<ChatMessage> messages;
};

struct Usage {
  std::optional<long long> prompt_tokens, completion_tokens;
  std::optional<double> cost_usd;  // only where the endpoint reports it (e.g. OpenRouter)
};
nlohmann::json to_json(const Usage& u);

struct Completion {
  LlmStatus status = LlmStatus::ok;
  std::string message;  // for every status but ok: what happened and what to check
  long http_code = 0;  // the last HTTP status received (0: none)
  std::string text;  // the model's reply
  std::string finish_reason;  // as the endpoint reports it ("stop", "length", "end_turn", ...)
  std::string model;  // as the endpoint reports it
  Usage usage;
  int attempts = 0;  // HTTP requests made, retries included
  double seconds = 0;  // wall time, waits included
};

/// Anything that answers a conversation. Implementations are not required to be thread-safe.
class ChatModel {
 public:
  virtual ~ChatModel() = default;
  /// Never throws for endpoint trouble (that is a status); throws Interrupted on Ctrl-C.
  virtual Completion complete(const Conversation& conv) = 0;
};

/// How one provider's API shapes requests and replies.
class Protocol {
 public:
  virtual ~Protocol() = default;
  virtual HttpRequest request(const Conversation& conv, const LlmConfig& cfg, const std::string& key) const = 0;
  /// Fills text, finish_reason, model and usage from a 200 body; throws Error(parse_error) naming
  /// what is missing.
  virtual void parse(const nlohmann::json& body, Completion& out) const = 0;
  /// After an HTTP 400: adjusts what it sends to what the endpoint's error asks for (e.g. OpenAI's
  /// newer models want max_completion_tokens). True when a resend may succeed.
  virtual bool adapt(std::string_view /*error_body*/) { return false; }
};

std::unique_ptr<Protocol> make_protocol(Provider p);

/// A ChatModel over HTTP with retries. One per thread (it owns its connection).
class HttpChatModel final : public ChatModel {
 public:
  /// Reads the API key from the environment now; a missing key makes every completion auth_missing.
  HttpChatModel(LlmConfig cfg, std::unique_ptr<HttpTransport> transport);
  Completion complete(const Conversation& conv) override;

 private:
  double wait_before_retry(int attempt, const HttpResponse& r) const;
  LlmConfig cfg_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<Protocol> protocol_;
  std::string key_;
  std::string key_problem_;  // non-empty: why there is no key
};

/// An HttpChatModel over libcurl.
std::unique_ptr<ChatModel> make_chat_model(const LlmConfig& cfg);

}  // namespace pkb
