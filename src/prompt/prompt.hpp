// A prompt for one problem configuration: the pure rendering step (templates + inputs -> text)
// and the gathering step that reads the inputs from the problem folder, the repository and the
// machine's calibration. `pkb prompt`, `pkb generate` and `pkb agent` all come through here.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "prompt/template.hpp"
#include "prompt/templates.hpp"
#include "roofline/hardware.hpp"
#include "spec/spec.hpp"

namespace pkb {

/// One in-context example, read from disk.
struct ExampleText {
  std::string label, problem;
  std::string baseline_path, baseline_source;
  std::string solution_path, solution_source;
};

/// Everything a prompt says, as plain values. `gather_prompt_inputs` fills it from the repository;
/// tests fill it by hand.
struct PromptInputs {
  std::string backend;  // empty: the templates' default
  TemplateVars problem;  // problem_stem, problem_summary, baseline_source, shapes, ...
  std::string readme;  // the problem's README.md, empty when it has none
  std::vector<ExampleText> examples;  // already filtered (never the problem's own solution)
  /// Hardware placeholders (gpu_name, link_store, ...) when calibrated; nullopt: not measured.
  std::optional<TemplateVars> hardware;
};

struct Prompt {
  std::string system, user;
  /// sha256 over both messages: identifies the exact prompt in generation records.
  std::string sha256() const;
  /// Both messages as one text for people ("pkb prompt --print").
  std::string to_text() const;
};

/// Pure: renders the system and user messages from `t` and `in`. Throws Error(invalid_argument)
/// for a placeholder without a value or an unknown backend/precision.
Prompt render_prompt(const PromptTemplates& t, const PromptInputs& in);

/// What a prompt is for: the problem and the instance the candidate will be evaluated on.
struct PromptRequest {
  std::string backend;  // empty: the templates' default
  int world = 4;
  std::string size;  // empty: the spec's default
  std::string dtype = "bf16";
  std::optional<HardwareFacts> hardware;  // nullopt: the prompt says the machine was not measured
  std::filesystem::path home;  // where example files are found (pkb's home)
};

/// Reads the problem's baseline and README, the ABI header and the backend's examples, resolves the
/// shapes for `req` (throws Error(invalid_argument) for a world size, size or dtype the problem does
/// not allow) and formats the hardware facts. Examples of the same problem are left out, so a
/// prompt never contains its own answer.
PromptInputs gather_prompt_inputs(const PromptTemplates& t, const Spec& spec, const PromptRequest& req);

/// Placeholders for the [hardware].measured template, formatted with units; a 0 (not measured)
/// becomes "not measured". `floor` estimates this instance's time floor from its roofline.
TemplateVars hardware_vars(const HardwareFacts& h, const Instance& inst);

/// Per-rank inputs and outputs of an instance as Markdown (ranks with equal tensors grouped).
std::string shapes_text(const Instance& inst);
/// The minimum traffic per rank from the spec's roofline expressions, or a line saying none is given.
std::string traffic_text(const Instance& inst);

}  // namespace pkb
