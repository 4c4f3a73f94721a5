// `pkb generate`: k samples per problem from a model, written where `pkb eval --solutions DIR`
// finds them. For run directory DIR (solutions/<run-name>):
//
//   DIR/<stem>_s<k>.cu     the extracted code (k = 0 .. samples-1), when the reply had any
//   DIR/<stem>_s<k>.json   the sample's record: status, model, parameters, prompt hash, reply,
//                          strategy, code hash, usage, timings
//   DIR/prompts/<stem>.md  the exact prompt the samples of that problem were given
//   DIR/run.json           what the last invocation asked for
//
// Files are written atomically, code before record, so an interrupted run leaves no half files and
// a rerun regenerates exactly the samples without a final record (ok or no_code_block).
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/llm.hpp"
#include "prompt/prompt.hpp"

namespace pkb {

struct ProblemPrompt {
  std::string stem;  // "1_allreduce"
  Prompt prompt;
  /// What the prompt was rendered for (world, size, dtype, backend, hardware), recorded with each
  /// sample so that the run is evaluated on the same configuration.
  nlohmann::json config = nlohmann::json::object();
};

struct GenerateOptions {
  std::filesystem::path run_dir;  // solutions/<run-name>
  std::string run_name;
  int samples = 1;
  int concurrency = 4;  // requests in flight at once
  LlmConfig llm;  // recorded with every sample
};

/// One finished (or kept) sample, for progress lines.
struct SampleResult {
  std::string stem;
  int sample = 0;
  LlmStatus status = LlmStatus::ok;
  std::string message;
  bool kept = false;  // a final record already existed; nothing was sent
  double seconds = 0;
};

struct GenerateSummary {
  int total = 0, done = 0, kept = 0, ok = 0, no_code = 0, failed = 0;
  /// "12/40 done: 9 ok, 1 no code, 2 failed, 0 kept"
  std::string line() const;
};

/// Makes one model per worker thread (models need not be thread-safe).
using ModelFactory = std::function<std::unique_ptr<ChatModel>()>;
/// Called after each sample, one call at a time.
using SampleProgress = std::function<void(const SampleResult&, const GenerateSummary&)>;

/// "<stem>_s<k>": the name shared with `pkb eval --solutions DIR`.
std::string sample_name(const std::string& stem, int sample);

/// Whether DIR already holds a final record for this sample (ok with its .cu, or no_code_block).
bool sample_is_final(const std::filesystem::path& run_dir, const std::string& stem, int sample);

/// A generated source file: one marker line (which keeps the build's compile check away from
/// generated code, see cmake/CompileAllCu.cmake), then `#line 1` so compiler messages count lines
/// as the model wrote them.
std::string generated_source(const std::string& code, const std::string& provenance);

/// Generates every (problem, sample) without a final record, `concurrency` at a time. Throws
/// Interrupted on Ctrl-C after the requests in flight are abandoned (records already written stay).
GenerateSummary run_generate(const std::vector<ProblemPrompt>& problems, const GenerateOptions& opts,
                             const ModelFactory& make_model, const SampleProgress& progress);

}  // namespace pkb
