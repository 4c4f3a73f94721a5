// Rendering: templates + plain inputs -> the two messages. No file or machine access here.
#include "prompt/prompt.hpp"

#include "core/hash.hpp"

namespace pkb {

namespace {

std::string render_examples(const PromptTemplates& t, const std::vector<ExampleText>& examples) {
  if (examples.empty()) return "";
  std::string out =
      render_template(examples.size() == 1 ? t.examples_intro_one : t.examples_intro_many, {}, t.where + " [examples].intro");
  for (auto& e : examples) {
    out += "\n";
    TemplateVars v{{"example_label", e.label},
                   {"example_problem", e.problem},
                   {"example_baseline_path", e.baseline_path},
                   {"example_baseline", e.baseline_source},
                   {"example_solution_path", e.solution_path},
                   {"example_solution", e.solution_source}};
    out += render_template(t.example_entry, v, t.where + " [examples].entry");
  }
  return out;
}

std::string render_hardware(const PromptTemplates& t, const PromptInputs& in) {
  if (in.hardware) {
    TemplateVars v = *in.hardware;
    v.insert(in.problem.begin(), in.problem.end());  // {world} and friends
    return render_template(t.hardware_measured, v, t.where + " [hardware].measured");
  }
  return render_template(t.hardware_unmeasured, in.problem, t.where + " [hardware].unmeasured");
}

/// Without leading and trailing blank lines: TOML multi-line strings end with a newline, and the
/// enclosing template decides the spacing around a section.
std::string trim_lines(const std::string& s) {
  size_t b = s.find_first_not_of("\n");
  size_t e = s.find_last_not_of("\n \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

Prompt render_prompt(const PromptTemplates& t, const PromptInputs& in) {
  const BackendTemplates& backend = t.backend(in.backend);
  auto dtype = in.problem.find("dtype");
  const PrecisionTemplates& precision = t.precision(dtype == in.problem.end() ? "bf16" : dtype->second);
  TemplateVars v = in.problem;
  v["backend_display"] = backend.display;
  v["backend_guidance"] = backend.guidance;
  v["precision_display"] = precision.display;
  v["precision_notes"] = precision.notes;
  v["problem_readme"] =
      in.readme.empty() ? "" : render_template(t.task_readme, {{"readme", in.readme}}, t.where + " [task].readme");
  v["hardware"] = trim_lines(render_hardware(t, in));
  v["examples"] = trim_lines(render_examples(t, in.examples));
  Prompt p;
  p.system = trim_lines(render_template(t.system, v, t.where + " [prompt].system")) + "\n";
  p.user = trim_lines(render_template(t.user, v, t.where + " [prompt].user")) + "\n";
  return p;
}

std::string Prompt::sha256() const {
  Sha256 h;
  h.update(system).update(std::string_view("\0", 1)).update(user);
  return h.hex();
}

std::string Prompt::to_text() const { return "===== system =====\n" + system + "\n===== user =====\n" + user; }

}  // namespace pkb
