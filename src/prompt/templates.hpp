// The prompt template file (prompts/prompts.toml) as typed data. Loading checks that every
// required template is present and well-formed, so a broken file fails at `pkb prompt`, with the
// key that is wrong, before any model is called.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

/// An in-context example: a problem's baseline plus a solution file that CI compiles.
struct ExampleRef {
  std::string label;
  std::string problem;  // problem stem, e.g. "1_allreduce"
  std::string solution;  // path relative to pkb's home, e.g. "solutions/examples/1_allreduce_oneshot.cu"
};

/// What varies by target backend.
struct BackendTemplates {
  std::string display;  // {backend_display}
  std::string guidance;  // {backend_guidance}
  std::vector<ExampleRef> examples;
};

/// What varies by benchmark dtype.
struct PrecisionTemplates {
  std::string display;  // {precision_display}
  std::string notes;  // {precision_notes}
};

/// The agent's feedback messages, one per outcome of an evaluation.
enum class FeedbackKind { compile_error, load_error, runtime_failure, mismatch, flagged, passed, no_code_block };
std::string_view to_string(FeedbackKind k);
inline constexpr FeedbackKind kAllFeedbackKinds[] = {
    FeedbackKind::compile_error, FeedbackKind::load_error, FeedbackKind::runtime_failure, FeedbackKind::mismatch,
    FeedbackKind::flagged,       FeedbackKind::passed,     FeedbackKind::no_code_block};

struct PromptTemplates {
  std::string where;  // the file, for error messages
  std::string default_backend;
  std::string system, user;  // [prompt]
  std::string task_readme;  // [task].readme
  std::string hardware_measured, hardware_unmeasured;  // [hardware]
  std::string examples_intro_one, examples_intro_many, example_entry;  // [examples]
  std::map<std::string, BackendTemplates> backends;  // [backends.<name>]
  std::map<std::string, PrecisionTemplates> precisions;  // [precision.<dtype name>]
  std::map<FeedbackKind, std::string> feedback;  // [feedback]

  /// The backend named `name` (empty: the default); throws Error(invalid_argument) listing the
  /// backends the file defines.
  const BackendTemplates& backend(const std::string& name) const;
  /// The precision section for a dtype name; throws Error(invalid_argument) when absent.
  const PrecisionTemplates& precision(const std::string& dtype) const;
};

/// Parses template TOML text; `where` names it in errors. Throws Error(parse_error) naming the
/// missing or malformed key.
PromptTemplates parse_templates(std::string_view toml_text, const std::string& where);
/// Reads and parses a template file.
PromptTemplates load_templates(const std::filesystem::path& path);
/// The template file: `override_path` if given, else $PKB_PROMPTS, else <pkb home>/prompts/prompts.toml.
std::filesystem::path templates_path(const std::string& override_path = {});

}  // namespace pkb
