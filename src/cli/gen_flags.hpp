// Flags shared by `pkb prompt`, `pkb generate` and `pkb agent`, each declared once: what the prompt
// targets (world size, size class, dtype, backend, templates, hardware facts) and which model
// answers (provider, endpoint, key variable, sampling parameters, timeouts).
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "llm/llm.hpp"
#include "prompt/prompt.hpp"
#include "spec/spec.hpp"

namespace pkb::cli {

struct PromptFlags {
  int gpus = 0;  // 0: visible GPUs, else the hardware file's count, else 4 (clamped to the problem's range)
  std::string size, dtype = "bf16", backend, templates, hardware = "auto", problems_dir;
};
void declare_prompt_flags(CLI::App& sub, PromptFlags& f);

/// The templates and hardware facts, loaded once for every problem of a command.
struct PromptSetup {
  PromptTemplates templates;
  std::optional<HardwareFacts> hardware;
  std::string hardware_note;  // where the facts came from, or why there are none
  int visible_gpus = 0;
};
PromptSetup load_prompt_setup(const PromptFlags& f);

/// The world size a prompt (and the agent's evaluation) is for.
int world_for(const Spec& spec, const PromptFlags& f, const PromptSetup& s);

/// Renders the prompt for `spec` at world size `world`.
Prompt build_prompt(const Spec& spec, const PromptFlags& f, const PromptSetup& s, int world);

struct ModelFlags {
  std::string provider = "openai", model, base_url, api_key_env;
  std::optional<double> temperature;
  int max_tokens = 32768, retries = 4;
  double timeout_s = 900;
};
void declare_model_flags(CLI::App& sub, ModelFlags& f);
LlmConfig llm_config(const ModelFlags& f);

/// "<provider>_<model>" with every character outside [A-Za-z0-9._-] replaced by '_'.
std::string default_run_name(const LlmConfig& c);

}  // namespace pkb::cli
