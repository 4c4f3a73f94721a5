// The HTTP clients against a fake endpoint on 127.0.0.1 (tests/fakes/fake_llm.hpp): request shapes
// per provider, reply parsing, and every failure status.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "fake_llm.hpp"
#include "llm/llm.hpp"

namespace pkb {
namespace {

using fake::FakeLlmServer;
using fake::Reply;
using nlohmann::json;

constexpr const char* kKeyVar = "PKB_LLM_TEST_KEY";

LlmConfig config(Provider p, const FakeLlmServer& s, const std::string& suffix) {
  LlmConfig c;
  c.provider = p;
  c.model = "fake-model";
  c.base_url = s.url(suffix);
  c.api_key_env = kKeyVar;
  c.temperature = 0.25;
  c.max_tokens = 1234;
  c.timeout_s = 10;
  c.max_retries = 2;
  c.backoff_s = 0.01;  // retries without waiting long in tests
  return c;
}

Conversation two_turns() {
  return {"be brief",
          {{ChatMessage::Role::user, "hello"}, {ChatMessage::Role::assistant, "hi"}, {ChatMessage::Role::user, "code?"}}};
}

double seconds_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Llm : public ::testing::Test {
 protected:
  void SetUp() override { setenv(kKeyVar, "sk-test", 1); }
  void TearDown() override { unsetenv(kKeyVar); }
};

TEST_F(Llm, OpenAiRequestAndReply) {
  FakeLlmServer s({Reply::answer("the answer")});
  Completion c = make_chat_model(config(Provider::openai, s, "/v1"))->complete(two_turns());
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  EXPECT_EQ(c.text, "the answer");
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(c.model, "fake-model");
  EXPECT_EQ(c.attempts, 1);
  EXPECT_EQ(c.http_code, 200);
  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_EQ(reqs[0].headers["authorization"], "Bearer sk-test");
  json body = reqs[0].json();
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["max_tokens"], 1234);
  EXPECT_EQ(body["temperature"], 0.25);
  ASSERT_EQ(body["messages"].size(), 4u);
  EXPECT_EQ(body["messages"][0], (json{{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(body["messages"][2], (json{{"role", "assistant"}, {"content", "hi"}}));
  // The fake reports body size / 4 as prompt tokens and text size / 4 as completion tokens.
  EXPECT_EQ(c.usage.prompt_tokens, static_cast<long long>(reqs[0].body.size() / 4));
  EXPECT_EQ(c.usage.completion_tokens, 10 / 4);
  EXPECT_FALSE(c.usage.cost_usd);
}

TEST_F(Llm, AnthropicRequestAndReply) {
  FakeLlmServer s({Reply::answer("from claude")});
  Completion c = make_chat_model(config(Provider::anthropic, s, "/v1"))->complete(two_turns());
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  EXPECT_EQ(c.text, "from claude");
  EXPECT_EQ(c.finish_reason, "end_turn");
  auto req = s.requests().at(0);
  EXPECT_EQ(req.path, "/v1/messages");
  EXPECT_EQ(req.headers["x-api-key"], "sk-test");
  EXPECT_EQ(req.headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(req.headers.count("authorization"), 0u);
  json body = req.json();
  EXPECT_EQ(body["system"], "be brief");
  EXPECT_EQ(body["max_tokens"], 1234);
  ASSERT_EQ(body["messages"].size(), 3u);
  EXPECT_EQ(body["messages"][1]["role"], "assistant");
  EXPECT_EQ(c.usage.prompt_tokens, static_cast<long long>(req.body.size() / 4));
  EXPECT_EQ(c.usage.completion_tokens, 11 / 4);
}

TEST_F(Llm, GeminiRequestAndReply) {
  FakeLlmServer s({Reply::answer("from gemini")});
  Completion c = make_chat_model(config(Provider::gemini, s, "/v1beta"))->complete(two_turns());
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  EXPECT_EQ(c.text, "from gemini");
  EXPECT_EQ(c.finish_reason, "STOP");
  auto req = s.requests().at(0);
  EXPECT_EQ(req.path, "/v1beta/models/fake-model:generateContent");
  EXPECT_EQ(req.headers["x-goog-api-key"], "sk-test");
  json body = req.json();
  EXPECT_EQ(body["systemInstruction"]["parts"][0]["text"], "be brief");
  EXPECT_EQ(body["contents"][1]["role"], "model");
  EXPECT_EQ(body["contents"][2]["parts"][0]["text"], "code?");
  EXPECT_EQ(body["generationConfig"]["maxOutputTokens"], 1234);
  EXPECT_EQ(body["generationConfig"]["temperature"], 0.25);
  EXPECT_EQ(c.usage.completion_tokens, 11 / 4);
}

TEST_F(Llm, ClientErrorIsNotRetriedAndQuotesTheEndpoint) {
  FakeLlmServer s({Reply::error(400, R"({"error":{"message":"context length exceeded"}})")});
  Completion c = make_chat_model(config(Provider::openai, s, "/v1"))->complete(two_turns());
  EXPECT_EQ(c.status, LlmStatus::http_error);
  EXPECT_EQ(c.http_code, 400);
  EXPECT_EQ(c.attempts, 1);
  EXPECT_NE(c.message.find("HTTP 400"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("context length exceeded"), std::string::npos) << c.message;
}

TEST_F(Llm, ServerErrorIsRetriedThenReported) {
  FakeLlmServer s({Reply::error(500, "upstream exploded")});
  Completion c = make_chat_model(config(Provider::anthropic, s, "/v1"))->complete(two_turns());
  EXPECT_EQ(c.status, LlmStatus::http_error);
  EXPECT_EQ(c.attempts, 3);  // max_retries = 2
  EXPECT_EQ(s.requests().size(), 3u);
  EXPECT_NE(c.message.find("HTTP 500"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("after 3 attempts"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("upstream exploded"), std::string::npos) << c.message;
}

TEST_F(Llm, RateLimitHonoursRetryAfterThenSucceeds) {
  FakeLlmServer s({Reply::error(429, R"({"error":{"message":"slow down"}})", {{"Retry-After", "1"}}), Reply::answer("ok now")});
  Completion c;
  double t = seconds_of([&] { c = make_chat_model(config(Provider::openai, s, "/v1"))->complete(two_turns()); });
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  EXPECT_EQ(c.text, "ok now");
  EXPECT_EQ(c.attempts, 2);
  EXPECT_GE(t, 0.95) << "waited as Retry-After asked, not the 10 ms backoff";
}

TEST_F(Llm, PersistentRateLimitIsRateLimited) {
  FakeLlmServer s({Reply::error(429, R"({"error":{"message":"quota"}})")});
  Completion c = make_chat_model(config(Provider::gemini, s, "/v1beta"))->complete(two_turns());
  EXPECT_EQ(c.status, LlmStatus::rate_limited);
  EXPECT_EQ(c.attempts, 3);
  EXPECT_NE(c.message.find("quota"), std::string::npos) << c.message;
}

TEST_F(Llm, SlowReplyIsATimeout) {
  Reply slow = Reply::answer("too late");
  slow.delay_ms = 3000;
  FakeLlmServer s({slow});
  LlmConfig cfg = config(Provider::openai, s, "/v1");
  cfg.timeout_s = 0.5;
  Completion c;
  double t = seconds_of([&] { c = make_chat_model(cfg)->complete(two_turns()); });
  EXPECT_EQ(c.status, LlmStatus::timeout);
  EXPECT_EQ(c.attempts, 1) << "a timeout is not retried";
  EXPECT_LT(t, 2.5);
  EXPECT_NE(c.message.find("--llm-timeout"), std::string::npos) << c.message;
}

TEST_F(Llm, MalformedRepliesAreMalformed) {
  FakeLlmServer s({Reply::raw("<html>proxy error</html>"), Reply::raw(R"({"object":"list"})")});
  auto model = make_chat_model(config(Provider::openai, s, "/v1"));
  Completion c1 = model->complete(two_turns());
  EXPECT_EQ(c1.status, LlmStatus::malformed_response);
  EXPECT_NE(c1.message.find("<html>proxy error"), std::string::npos) << c1.message;
  Completion c2 = model->complete(two_turns());
  EXPECT_EQ(c2.status, LlmStatus::malformed_response);
  EXPECT_NE(c2.message.find("choices"), std::string::npos) << c2.message;
}

TEST_F(Llm, MissingKeySendsNothing) {
  FakeLlmServer s({Reply::answer("never")});
  LlmConfig cfg = config(Provider::anthropic, s, "/v1");
  cfg.api_key_env = "PKB_LLM_TEST_UNSET_KEY";
  Completion c = make_chat_model(cfg)->complete(two_turns());
  EXPECT_EQ(c.status, LlmStatus::auth_missing);
  EXPECT_NE(c.message.find("PKB_LLM_TEST_UNSET_KEY"), std::string::npos) << c.message;
  EXPECT_TRUE(s.requests().empty());
}

TEST_F(Llm, LocalEndpointMayRunWithoutAKey) {
  const char* saved = std::getenv("OPENAI_API_KEY");
  std::string keep = saved ? saved : "";
  unsetenv("OPENAI_API_KEY");
  FakeLlmServer s({Reply::answer("local")});
  LlmConfig cfg = config(Provider::openai, s, "/v1");
  cfg.api_key_env.clear();  // the default variable, unset, and a --base-url: no key needed
  Completion c = make_chat_model(cfg)->complete(two_turns());
  if (saved) setenv("OPENAI_API_KEY", keep.c_str(), 1);
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  EXPECT_EQ(s.requests().at(0).headers.count("authorization"), 0u);
}

TEST_F(Llm, OpenAiAdaptsToMaxCompletionTokens) {
  FakeLlmServer s(
      {Reply::error(400, R"({"error":{"message":"Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."}})"),
       Reply::answer("adapted")});
  Completion c = make_chat_model(config(Provider::openai, s, "/v1"))->complete(two_turns());
  ASSERT_EQ(c.status, LlmStatus::ok) << c.message;
  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].json().contains("max_tokens"));
  EXPECT_FALSE(reqs[1].json().contains("max_tokens"));
  EXPECT_EQ(reqs[1].json()["max_completion_tokens"], 1234);
}

TEST_F(Llm, UnreachableEndpointIsANetworkError) {
  int port;
  {
    FakeLlmServer gone({});
    port = gone.port();
  }  // closed: nothing listens there now
  LlmConfig cfg;
  cfg.model = "m";
  cfg.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  cfg.api_key_env = kKeyVar;
  cfg.max_retries = 1;
  cfg.backoff_s = 0.01;
  Completion c = make_chat_model(cfg)->complete(two_turns());
  EXPECT_EQ(c.status, LlmStatus::network_error);
  EXPECT_EQ(c.attempts, 2);
  EXPECT_NE(c.message.find("127.0.0.1"), std::string::npos) << c.message;
}

TEST(RetryAfter, SecondsOrHttpDate) {
  std::time_t now = 1700000000;  // 2023-11-14T22:13:20Z
  EXPECT_EQ(parse_retry_after("30", now), 30.0);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0.0);
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:14:00 GMT", now), 40.0);
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now), 0.0) << "a date in the past means now";
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("", now));
}

TEST(LlmNames, StatusesAndProvidersRoundTrip) {
  for (auto s : {LlmStatus::ok, LlmStatus::http_error, LlmStatus::rate_limited, LlmStatus::timeout, LlmStatus::network_error,
                 LlmStatus::malformed_response, LlmStatus::no_code_block, LlmStatus::auth_missing})
    EXPECT_EQ(parse_llm_status(to_string(s)), s);
  EXPECT_EQ(parse_provider("anthropic"), Provider::anthropic);
  EXPECT_FALSE(parse_provider("together"));
  LlmConfig c;
  c.provider = Provider::gemini;
  EXPECT_EQ(c.endpoint(), "https://generativelanguage.googleapis.com/v1beta");
  c.base_url = "http://x/v1/";
  EXPECT_EQ(c.endpoint(), "http://x/v1");
}

}  // namespace
}  // namespace pkb
