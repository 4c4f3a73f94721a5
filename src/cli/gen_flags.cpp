#include "cli/gen_flags.hpp"

#include <algorithm>
#include <cctype>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "eval/system.hpp"

namespace pkb::cli {

void declare_prompt_flags(CLI::App& sub, PromptFlags& f) {
  sub.add_option("--gpus,-g", f.gpus, "World size W the solution is written for (default: visible GPUs, else 4)")
      ->default_str("")  // 0 stands for "all visible"; --help says so in words
      ->check(at_least(1, kGpusHint))
      ->envname("PKB_GPUS");
  sub.add_option("--size,-s", f.size, "Size class (default: the spec's)")->envname("PKB_SIZE");
  sub.add_option("--dtype", f.dtype, "Benchmark dtype D: bf16, fp16 or fp32")->envname("PKB_DTYPE");
  sub.add_option("--backend", f.backend, "Template backend section (default: the template file's)");
  sub.add_option("--templates", f.templates, "Prompt template file (default: <pkb>/prompts/prompts.toml)")
      ->envname("PKB_PROMPTS");
  sub.add_option("--hardware", f.hardware,
                 "Hardware facts for the prompt: auto (this machine's `pkb calibrate` record), none, or a calibration JSON file")
      ->envname("PKB_HARDWARE");
  sub.add_option("--problems-dir", f.problems_dir, "Problem folders (default: <pkb>/problems)")->envname("PKB_PROBLEMS_DIR");
}

PromptSetup load_prompt_setup(const PromptFlags& f) {
  PromptSetup s;
  s.templates = load_templates(templates_path(f.templates));
  SystemInfo sys = probe_system();
  s.visible_gpus = sys.gpu_count;
  if (f.hardware == "none") {
    s.hardware_note = "hardware facts left out (--hardware none)";
  } else if (f.hardware == "auto" && sys.gpu_count == 0) {
    s.hardware_note = "no GPU visible; the prompt says the hardware was not measured";
  } else if (f.hardware == "auto") {
    s.hardware = load_calibration(sys.gpu_name, sys.gpu_count, sys.nvidia_driver);
    s.hardware_note = s.hardware
                          ? "hardware facts from " + calibration_path(sys.gpu_name, sys.gpu_count, sys.nvidia_driver).string()
                          : "no calibration for this machine (run `pkb calibrate`); the prompt says so";
  } else {
    try {
      s.hardware = hardware_from_json(nlohmann::json::parse(read_file(f.hardware)));
    } catch (const nlohmann::json::exception& e) {
      fail(Errc::parse_error, f.hardware + ": not a calibration record: " + e.what());
    }
    s.hardware_note = "hardware facts from " + f.hardware;
  }
  return s;
}

int world_for(const Spec& spec, const PromptFlags& f, const PromptSetup& s) {
  if (f.gpus > 0) {
    spec.require_world(f.gpus);  // the same refusal whatever GPUs the machine has
    return f.gpus;
  }
  int w = 4;  // PKB's usual node slice, when nothing says otherwise
  if (s.visible_gpus >= spec.min_world) w = s.visible_gpus;
  else if (s.hardware && s.hardware->gpu_count > 0) w = s.hardware->gpu_count;
  return std::clamp(w, spec.min_world, spec.max_world);
}

Prompt build_prompt(const Spec& spec, const PromptFlags& f, const PromptSetup& s, int world) {
  PromptRequest req;
  req.backend = f.backend;
  req.world = world;
  req.size = f.size;
  req.dtype = f.dtype;
  req.hardware = s.hardware;
  req.home = pkb_home();
  return render_prompt(s.templates, gather_prompt_inputs(s.templates, spec, req));
}

void declare_model_flags(CLI::App& sub, ModelFlags& f) {
  sub.add_option("--model,-m", f.model, "Model name as the endpoint knows it")->required()->envname("PKB_MODEL");
  sub.add_option("--provider", f.provider,
                 "API: openai (also Together, vLLM, llama.cpp, OpenRouter via --base-url), anthropic or gemini")
      ->check(CLI::IsMember({"openai", "anthropic", "gemini"}))
      ->envname("PKB_PROVIDER");
  sub.add_option("--base-url", f.base_url, "Endpoint base URL, e.g. http://127.0.0.1:8000/v1 (default: the provider's)")
      ->envname("PKB_BASE_URL");
  sub.add_option(
         "--api-key-env", f.api_key_env,
         "Environment variable holding the key (default: OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY/GOOGLE_API_KEY)")
      ->envname("PKB_API_KEY_ENV");
  sub.add_option("--temperature", f.temperature, "Sampling temperature (default: the endpoint's)")->envname("PKB_TEMPERATURE");
  sub.add_option("--max-tokens", f.max_tokens, "Most tokens per reply")->envname("PKB_MAX_TOKENS");
  sub.add_option("--llm-timeout", f.timeout_s, "Seconds to wait for one reply")->envname("PKB_LLM_TIMEOUT");
  sub.add_option("--retries", f.retries, "Retries after HTTP 429/5xx or a connection failure (exponential backoff)")
      ->envname("PKB_LLM_RETRIES");
}

LlmConfig llm_config(const ModelFlags& f) {
  LlmConfig c;
  c.provider = *parse_provider(f.provider);  // checked by CLI11
  c.model = f.model;
  c.base_url = f.base_url;
  c.api_key_env = f.api_key_env;
  c.temperature = f.temperature;
  c.max_tokens = f.max_tokens;
  c.timeout_s = f.timeout_s;
  c.max_retries = std::max(0, f.retries);
  return c;
}

std::string default_run_name(const LlmConfig& c) {
  std::string out = std::string(to_string(c.provider)) + "_";
  for (char ch : c.model) out.push_back(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ? ch : '_');
  return out;
}

}  // namespace pkb::cli
