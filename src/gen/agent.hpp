// `pkb agent`: a model improves one solution over several steps, judged by the real harness.
//
//   step i: ask the model (the prompt, then the whole conversation so far)
//           -> extract the code -> write DIR/step_<i>.cu -> evaluate it
//           -> keep it as DIR/best.cu if it passes faster than the best so far
//           -> stop if it passes with speedup >= target, or at the step limit
//           -> else tell the model what happened (compiler errors, failed checks, the crash or
//              timeout, or the timing) using the [feedback] templates, and go on.
//   DIR/transcript.json holds every prompt, reply, candidate path and evaluation record; it is
//   rewritten after every step, so an interrupted run keeps what it did.
//
// The evaluator is an interface so that the loop can be tested without GPUs.
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "llm/llm.hpp"
#include "prompt/prompt.hpp"
#include "report/record.hpp"

namespace pkb {

/// Judges one candidate file. The harness implementation runs `pkb eval` in-process.
class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  /// Evaluates `candidate`; failures of the candidate are statuses in the record. Throws only for
  /// the harness's own trouble (and Interrupted).
  virtual EvalRecord evaluate(const std::filesystem::path& candidate) = 0;
};

struct AgentOptions {
  std::string problem;  // stem, for the transcript
  std::filesystem::path dir;  // solutions/<run-name>/agent/<stem>
  int steps = 5;
  double target_speedup = 1.0;  // stop at the first passing candidate at least this fast (0: any pass)
  nlohmann::json meta = nlohmann::json::object();  // model, provider, parameters, evaluation config
  std::string provenance;  // the marker line's text in step files
  std::function<void(const std::string&)> progress;  // one line per event; may be empty
};

struct AgentResult {
  int steps_run = 0;
  int best_step = 0;  // 0: no passing candidate
  std::optional<double> best_speedup;
  std::string stop_reason;  // "target reached", "step limit", "model: ...", "harness_error: ..."
  std::filesystem::path transcript;
};

/// Runs the loop. Throws Interrupted on Ctrl-C (the transcript keeps the finished steps).
AgentResult run_agent(ChatModel& model, CandidateEvaluator& evaluator, const Prompt& prompt, const PromptTemplates& templates,
                      const AgentOptions& opts);

/// Pure: the message that tells the model how its candidate did (the [feedback] template for the
/// record's status, with the compiler log, failed checks, failure text or timing filled in).
std::string feedback_message(const PromptTemplates& t, const EvalRecord& r, int steps_left, double target_speedup);
/// Pure: the message after a reply without a code block ([feedback].no_code_block).
std::string no_code_feedback(const PromptTemplates& t, int steps_left, double target_speedup);

}  // namespace pkb
