#include "gen/agent.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/interrupt.hpp"
#include "gen/generate.hpp"
#include "llm/extract.hpp"

namespace pkb {

using nlohmann::json;

namespace {

// The model needs the first compiler errors (later ones are mostly consequences) and the last
// lines of a crashed rank's output (where the failure is). Both are bounded to keep turns small.
constexpr size_t kMaxLines = 60, kMaxChars = 6000;

std::string head(const std::string& text) {
  size_t pos = 0;
  for (size_t lines = 0; pos < text.size() && lines < kMaxLines && pos < kMaxChars; ++lines) {
    size_t eol = text.find('\n', pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  pos = std::min(pos, kMaxChars);
  return pos >= text.size() ? text : text.substr(0, pos) + "[... " + std::to_string(text.size() - pos) + " more bytes]\n";
}

std::string tail(const std::string& text) {
  size_t pos = text.size();
  for (size_t lines = 0; pos > 0 && lines <= kMaxLines && text.size() - pos < kMaxChars; ++lines) {
    size_t eol = text.rfind('\n', pos - 1);
    pos = eol == std::string::npos ? 0 : eol;
  }
  pos = std::max(pos, text.size() > kMaxChars ? text.size() - kMaxChars : size_t{0});
  return pos == 0 ? text : "[... " + std::to_string(pos) + " earlier bytes]" + text.substr(pos);
}

std::string failed_checks_text(const EvalRecord& r) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < r.checks.size() && i < kShown; ++i) out += "- " + r.checks[i].what + ": " + r.checks[i].message + "\n";
  if (r.checks.size() > kShown) out += fmt::format("- ... and {} more failed checks\n", r.checks.size() - kShown);
  return out.empty() ? "- (no individual check recorded)\n" : out;
}

std::string roofline_text(const json& roofline) {
  if (!roofline.is_object() || !roofline.contains("pct") || !roofline["pct"].is_number()) return "roofline not measured";
  // Keys as roofline/roofline.cpp writes them: pct is floor / measured in percent.
  std::string floor = roofline.contains("floor_us") && roofline["floor_us"].is_number()
                          ? fmt::format(", floor {:.1f} us", roofline["floor_us"].get<double>())
                          : "";
  std::string bound =
      roofline.contains("bound") && roofline["bound"].is_string() ? ", " + roofline["bound"].get<std::string>() + "-bound" : "";
  return fmt::format("{:.0f}% of the roofline{}{}", roofline["pct"].get<double>(), floor, bound);
}

/// The candidate's profile summary (pkb eval --profile, eval/profile_out.hpp), already bounded to
/// 2 KB by the record, as a block for the next prompt; "" where no profile was collected.
std::string profile_text(const json& profile) {
  if (!profile.is_object() || !profile.contains("sides") || !profile["sides"].is_array()) return "";
  for (auto& s : profile["sides"]) {
    if (!s.is_object() || s.value("label", std::string()) != "candidate" || !s.value("collected", false)) continue;
    if (!s.contains("text") || !s["text"].is_string()) return "";
    return "Profile of your solution (CUPTI, a few calls after the timed ones; per call the slowest rank):\n```\n" +
           s["text"].get<std::string>() + "```\n";
  }
  return "";
}

FeedbackKind kind_for(Status s) {
  switch (s) {
    case Status::ok: return FeedbackKind::passed;
    case Status::compile_error: return FeedbackKind::compile_error;
    case Status::load_error: return FeedbackKind::load_error;
    case Status::mismatch: return FeedbackKind::mismatch;
    case Status::flagged: return FeedbackKind::flagged;
    default: return FeedbackKind::runtime_failure;  // runtime_error, crash, timeout
  }
}

/// Every [feedback] placeholder with a neutral value, so that any template may use any of them.
TemplateVars feedback_vars(int steps_left, double target_speedup) {
  return {{"status", ""},
          {"message", ""},
          {"details", ""},
          {"steps_left", std::to_string(steps_left)},
          {"target_speedup", fmt::format("{:.2f}", target_speedup)},
          {"speedup", "not timed"},
          {"baseline_us", "?"},
          {"candidate_us", "?"},
          {"roofline", "roofline not measured"},
          {"profile", ""}};
}

std::string render_feedback(const PromptTemplates& t, FeedbackKind kind, const TemplateVars& v) {
  return render_template(t.feedback.at(kind), v, t.where + " [feedback]." + std::string(to_string(kind)));
}

}  // namespace

std::string feedback_message(const PromptTemplates& t, const EvalRecord& r, int steps_left, double target_speedup) {
  FeedbackKind kind = kind_for(r.status);
  TemplateVars v = feedback_vars(steps_left, target_speedup);
  v["status"] = to_string(r.status);
  v["message"] = r.message;
  if (r.speedup) v["speedup"] = fmt::format("{:.2f}", *r.speedup);
  if (r.baseline_timing.measured) v["baseline_us"] = fmt::format("{:.1f}", r.baseline_timing.us.median);
  if (r.candidate_timing.measured) v["candidate_us"] = fmt::format("{:.1f}", r.candidate_timing.us.median);
  v["roofline"] = roofline_text(r.roofline);
  v["profile"] = profile_text(r.profile);
  if (kind == FeedbackKind::compile_error) v["details"] = head(r.compile_log.empty() ? r.message : r.compile_log);
  if (kind == FeedbackKind::mismatch || kind == FeedbackKind::flagged) v["details"] = failed_checks_text(r);
  if (kind == FeedbackKind::runtime_failure) {
    std::string where = r.failed_rank >= 0 ? fmt::format("Rank {}, phase '{}'.", r.failed_rank, r.failed_phase) : "";
    v["details"] = where + (r.log_tail.empty() ? "" : "\nOutput of that rank (last lines):\n```\n" + tail(r.log_tail) + "\n```");
  }
  return render_feedback(t, kind, v);
}

std::string no_code_feedback(const PromptTemplates& t, int steps_left, double target_speedup) {
  TemplateVars v = feedback_vars(steps_left, target_speedup);
  v["status"] = to_string(LlmStatus::no_code_block);
  v["message"] = "the reply has no ```cu block";
  return render_feedback(t, FeedbackKind::no_code_block, v);
}

namespace {

/// The loop's state between steps, and the transcript it writes.
class Session {
 public:
  Session(const Prompt& prompt, const AgentOptions& o) : o_(o) {
    conv_.system = prompt.system;
    conv_.messages.push_back({ChatMessage::Role::user, prompt.user});
    transcript_ = {{"schema_version", 1},      {"kind", "agent_transcript"}, {"problem", o.problem},
                   {"started", now_iso8601()}, {"steps_limit", o.steps},     {"target_speedup", o.target_speedup},
                   {"meta", o.meta},           {"system", prompt.system},    {"steps", json::array()},
                   {"best", nullptr}};
  }

  /// One step; returns the stop reason, or "" to go on.
  std::string step(int i, ChatModel& model, CandidateEvaluator& evaluator, const PromptTemplates& t);

  void save(const std::string& stop_reason) {
    transcript_["stop_reason"] = stop_reason;
    transcript_["updated"] = now_iso8601();
    write_file_atomic(o_.dir / "transcript.json", transcript_.dump(2) + "\n");
  }
  void say(const std::string& line) const {
    if (o_.progress) o_.progress(line);
  }

  AgentResult result;

 private:
  void keep_if_best(int i, const EvalRecord& rec, const fs::path& file);
  const AgentOptions& o_;
  Conversation conv_;
  json transcript_;
};

void Session::keep_if_best(int i, const EvalRecord& rec, const fs::path& file) {
  if (!is_pass(rec.status)) return;
  double speed = rec.speedup.value_or(0.0);
  if (result.best_step && speed <= result.best_speedup.value_or(0.0)) return;
  result.best_step = i;
  result.best_speedup = rec.speedup;
  write_file_atomic(o_.dir / "best.cu", read_file(file));
  transcript_["best"] = {{"step", i},
                         {"speedup", rec.speedup ? json(*rec.speedup) : json(nullptr)},
                         {"candidate", file.filename().string()},
                         {"path", "best.cu"}};
}

std::string Session::step(int i, ChatModel& model, CandidateEvaluator& evaluator, const PromptTemplates& t) {
  json s{{"step", i}, {"prompt", conv_.messages.back().text}};
  say(fmt::format("step {}/{}: asking the model", i, o_.steps));
  Completion c = model.complete(conv_);
  s["llm"] = {{"status", to_string(c.status)}, {"message", c.message},   {"finish_reason", c.finish_reason},
              {"usage", to_json(c.usage)},     {"attempts", c.attempts}, {"seconds", c.seconds}};
  s["reply"] = c.text;
  auto finish = [&](std::string stop) {
    transcript_["steps"].push_back(s);
    return stop;
  };
  if (c.status != LlmStatus::ok) return finish("model: " + std::string(to_string(c.status)) + ": " + c.message);
  conv_.messages.push_back({ChatMessage::Role::assistant, c.text});
  ExtractedCode x = extract_code(c.text);
  s["strategy"] = x.strategy;
  int left = o_.steps - i;
  std::string feedback;
  if (!x.code) {
    s["llm"]["status"] = to_string(LlmStatus::no_code_block);
    say(fmt::format("step {}/{}: no code block in the reply", i, o_.steps));
    feedback = no_code_feedback(t, left, o_.target_speedup);
  } else {
    fs::path file = o_.dir / fmt::format("step_{}.cu", i);
    write_file_atomic(file, generated_source(*x.code, o_.provenance + fmt::format(", agent step {}", i)));
    s["candidate"] = file.filename().string();
    s["code_sha256"] = sha256_hex(*x.code);
    say(fmt::format("step {}/{}: evaluating {}", i, o_.steps, file.filename().string()));
    EvalRecord rec = evaluator.evaluate(file);
    s["record"] = to_json(rec);
    say(fmt::format("step {}/{}: {}{}", i, o_.steps, to_string(rec.status),
                    rec.speedup           ? fmt::format(", speedup {:.2f}x", *rec.speedup)
                    : rec.message.empty() ? ""
                                          : ": " + rec.message));
    keep_if_best(i, rec, file);
    if (rec.status == Status::harness_error) return finish("harness_error: " + rec.message);
    if (rec.status == Status::unsupported) return finish("unsupported: " + rec.message);
    if (is_pass(rec.status) && (o_.target_speedup <= 0 || rec.speedup.value_or(0.0) >= o_.target_speedup))
      return finish("target reached");
    feedback = feedback_message(t, rec, left, o_.target_speedup);
  }
  if (left == 0) return finish("step limit");
  s["feedback"] = feedback;
  conv_.messages.push_back({ChatMessage::Role::user, feedback});
  return finish("");
}

}  // namespace

AgentResult run_agent(ChatModel& model, CandidateEvaluator& evaluator, const Prompt& prompt, const PromptTemplates& templates,
                      const AgentOptions& opts) {
  if (opts.steps < 1) fail(Errc::invalid_argument, "--steps must be at least 1");
  // A new run replaces the previous one in this directory: no stale step or best file may survive.
  std::error_code ec;
  if (fs::exists(opts.dir, ec))
    for (auto& e : fs::directory_iterator(opts.dir)) {
      std::string name = e.path().filename().string();
      if (name == "best.cu" || (name.rfind("step_", 0) == 0 && e.path().extension() == ".cu")) fs::remove(e.path(), ec);
    }
  Session s(prompt, opts);
  s.result.transcript = opts.dir / "transcript.json";
  s.save("running");
  std::string stop;
  for (int i = 1; stop.empty(); ++i) {
    // Keep the finished steps on disk, then let the exception go up to the command's boundary.
    try {
      stop = s.step(i, model, evaluator, templates);
    } catch (const Interrupted&) {
      s.save("interrupted at step " + std::to_string(i));
      throw;
    } catch (const std::exception& e) {
      s.save("error at step " + std::to_string(i) + ": " + e.what());
      throw;
    }
    s.result.steps_run = i;
    s.save(stop.empty() ? "running" : stop);
  }
  s.result.stop_reason = stop;
  s.say("stopped: " + stop);
  return s.result;
}

}  // namespace pkb
