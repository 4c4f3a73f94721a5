// The three wire protocols. Each builds one JSON request from a conversation and reads the reply's
// text, finish reason and token usage.
//
//   OpenAI chat completions  POST {base}/chat/completions        Authorization: Bearer KEY
//   Anthropic Messages       POST {base}/messages                x-api-key: KEY, anthropic-version
//   Gemini generateContent   POST {base}/models/{model}:generateContent   x-goog-api-key: KEY
#include "core/error.hpp"
#include "llm/llm.hpp"

namespace pkb {

using nlohmann::json;

namespace {

const char* role_name(ChatMessage::Role r, const char* assistant) { return r == ChatMessage::Role::user ? "user" : assistant; }

/// A required member, or a parse error that says which.
const json& member(const json& j, const char* key, const char* path) {
  if (!j.is_object() || !j.contains(key)) fail(Errc::parse_error, std::string("no '") + path + "' in the reply");
  return j.at(key);
}

/// A string member, or "" when it is absent or null.
std::string text_or_empty(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::optional<long long> integer_at(const json& j, const char* a, const char* b) {
  if (j.contains(a) && j[a].is_object() && j[a].contains(b) && j[a][b].is_number_integer()) return j[a][b].get<long long>();
  return std::nullopt;
}

class OpenAiProtocol final : public Protocol {
 public:
  HttpRequest request(const Conversation& conv, const LlmConfig& cfg, const std::string& key) const override {
    json messages = json::array();
    if (!conv.system.empty()) messages.push_back({{"role", "system"}, {"content", conv.system}});
    for (auto& m : conv.messages) messages.push_back({{"role", role_name(m.role, "assistant")}, {"content", m.text}});
    json body{{"model", cfg.model}, {"messages", messages}, {max_tokens_field_, cfg.max_tokens}};
    if (cfg.temperature && send_temperature_) body["temperature"] = *cfg.temperature;
    HttpRequest r{cfg.endpoint() + "/chat/completions", {}, body.dump(), cfg.timeout_s};
    if (!key.empty()) r.headers.push_back("Authorization: Bearer " + key);
    return r;
  }

  void parse(const json& body, Completion& out) const override {
    const json& choices = member(body, "choices", "choices");
    if (!choices.is_array() || choices.empty()) fail(Errc::parse_error, "'choices' is empty");
    const json& message = member(choices[0], "message", "choices[0].message");
    const json& content = member(message, "content", "choices[0].message.content");
    if (content.is_string()) out.text = content.get<std::string>();
    else if (content.is_array())  // some servers send content parts
      for (auto& part : content) out.text += part.value("text", "");
    else if (!content.is_null()) fail(Errc::parse_error, "choices[0].message.content is neither text nor parts");
    out.finish_reason = text_or_empty(choices[0], "finish_reason");
    out.model = text_or_empty(body, "model");
    out.usage.prompt_tokens = integer_at(body, "usage", "prompt_tokens");
    out.usage.completion_tokens = integer_at(body, "usage", "completion_tokens");
    if (body.contains("usage") && body["usage"].is_object() && body["usage"].contains("cost") &&
        body["usage"]["cost"].is_number())
      out.usage.cost_usd = body["usage"]["cost"].get<double>();
  }

  // OpenAI's reasoning models reject max_tokens ("use max_completion_tokens") and any temperature
  // but the default; each is adjusted once, when the endpoint says so.
  bool adapt(std::string_view error_body) override {
    if (max_tokens_field_ == "max_tokens" && error_body.find("max_completion_tokens") != std::string_view::npos) {
      max_tokens_field_ = "max_completion_tokens";
      return true;
    }
    if (send_temperature_ && error_body.find("temperature") != std::string_view::npos) {
      send_temperature_ = false;
      return true;
    }
    return false;
  }

 private:
  std::string max_tokens_field_ = "max_tokens";
  bool send_temperature_ = true;
};

class AnthropicProtocol final : public Protocol {
 public:
  HttpRequest request(const Conversation& conv, const LlmConfig& cfg, const std::string& key) const override {
    json messages = json::array();
    for (auto& m : conv.messages) messages.push_back({{"role", role_name(m.role, "assistant")}, {"content", m.text}});
    json body{{"model", cfg.model}, {"max_tokens", cfg.max_tokens}, {"messages", messages}};
    if (!conv.system.empty()) body["system"] = conv.system;
    if (cfg.temperature) body["temperature"] = *cfg.temperature;
    HttpRequest r{cfg.endpoint() + "/messages", {"anthropic-version: 2023-06-01"}, body.dump(), cfg.timeout_s};
    if (!key.empty()) r.headers.push_back("x-api-key: " + key);
    return r;
  }

  void parse(const json& body, Completion& out) const override {
    const json& content = member(body, "content", "content");
    if (!content.is_array()) fail(Errc::parse_error, "'content' is not an array of blocks");
    for (auto& block : content)
      if (block.value("type", "") == "text") out.text += block.value("text", "");
    out.finish_reason = text_or_empty(body, "stop_reason");
    out.model = text_or_empty(body, "model");
    out.usage.prompt_tokens = integer_at(body, "usage", "input_tokens");
    out.usage.completion_tokens = integer_at(body, "usage", "output_tokens");
  }
};

class GeminiProtocol final : public Protocol {
 public:
  HttpRequest request(const Conversation& conv, const LlmConfig& cfg, const std::string& key) const override {
    json contents = json::array();
    for (auto& m : conv.messages)
      contents.push_back({{"role", role_name(m.role, "model")}, {"parts", json::array({{{"text", m.text}}})}});
    json generation{{"maxOutputTokens", cfg.max_tokens}};
    if (cfg.temperature) generation["temperature"] = *cfg.temperature;
    json body{{"contents", contents}, {"generationConfig", generation}};
    if (!conv.system.empty()) body["systemInstruction"] = {{"parts", json::array({{{"text", conv.system}}})}};
    HttpRequest r{cfg.endpoint() + "/models/" + cfg.model + ":generateContent", {}, body.dump(), cfg.timeout_s};
    if (!key.empty()) r.headers.push_back("x-goog-api-key: " + key);
    return r;
  }

  void parse(const json& body, Completion& out) const override {
    if (!body.contains("candidates") && body.contains("promptFeedback"))
      fail(Errc::parse_error, "no candidates; the prompt was blocked: " + body["promptFeedback"].dump());
    const json& candidates = member(body, "candidates", "candidates");
    if (!candidates.is_array() || candidates.empty()) fail(Errc::parse_error, "'candidates' is empty");
    const json& c = candidates[0];
    if (c.contains("content") && c["content"].contains("parts"))
      for (auto& part : c["content"]["parts"])
        if (!part.value("thought", false)) out.text += part.value("text", "");  // skip thinking summaries
    out.finish_reason = text_or_empty(c, "finishReason");
    out.model = text_or_empty(body, "modelVersion");
    out.usage.prompt_tokens = integer_at(body, "usageMetadata", "promptTokenCount");
    out.usage.completion_tokens = integer_at(body, "usageMetadata", "candidatesTokenCount");
  }
};

}  // namespace

std::unique_ptr<Protocol> make_protocol(Provider p) {
  switch (p) {
    case Provider::openai: return std::make_unique<OpenAiProtocol>();
    case Provider::anthropic: return std::make_unique<AnthropicProtocol>();
    case Provider::gemini: return std::make_unique<GeminiProtocol>();
  }
  fail(Errc::internal, "unknown provider");
}

}  // namespace pkb
