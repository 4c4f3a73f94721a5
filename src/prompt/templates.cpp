#include "prompt/templates.hpp"

#include <toml++/toml.h>
#include <cstdlib>

#include "core/error.hpp"
#include "core/files.hpp"
#include "prompt/template.hpp"

namespace pkb {

std::string_view to_string(FeedbackKind k) {
  switch (k) {
    case FeedbackKind::compile_error: return "compile_error";
    case FeedbackKind::load_error: return "load_error";
    case FeedbackKind::runtime_failure: return "runtime_failure";
    case FeedbackKind::mismatch: return "mismatch";
    case FeedbackKind::flagged: return "flagged";
    case FeedbackKind::passed: return "passed";
    case FeedbackKind::no_code_block: return "no_code_block";
  }
  return "?";
}

namespace {

/// A required string at `path` (dotted), checked for template syntax.
std::string text_at(const toml::table& root, const std::string& path, const std::string& where) {
  auto node = root.at_path(path);
  if (!node) fail(Errc::parse_error, where + ": missing key " + path);
  auto s = node.value<std::string>();
  if (!s) fail(Errc::parse_error, where + ": " + path + " must be a string");
  template_placeholders(*s, where + " " + path);  // throws on a stray brace
  return *s;
}

std::vector<ExampleRef> examples_of(const toml::table& backend, const std::string& path, const std::string& where) {
  std::vector<ExampleRef> out;
  auto arr = backend["examples"].as_array();
  if (!arr) return out;
  for (size_t i = 0; i < arr->size(); ++i) {
    auto* t = arr->get(i)->as_table();
    std::string at = path + ".examples[" + std::to_string(i) + "]";
    if (!t) fail(Errc::parse_error, where + ": " + at + " must be a table");
    ExampleRef e;
    for (auto [key, field] : {std::pair{"label", &e.label}, {"problem", &e.problem}, {"solution", &e.solution}}) {
      auto v = (*t)[key].value<std::string>();
      if (!v) fail(Errc::parse_error, where + ": " + at + " needs a string '" + key + "'");
      *field = *v;
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace

PromptTemplates parse_templates(std::string_view toml_text, const std::string& where) {
  toml::table root;
  try {
    root = toml::parse(toml_text, where);
  } catch (const toml::parse_error& e) {
    fail(Errc::parse_error, where + ": " + std::string(e.description()));
  }
  PromptTemplates t;
  t.where = where;
  t.default_backend = root["meta"]["default_backend"].value_or(std::string("cuda"));
  t.system = text_at(root, "prompt.system", where);
  t.user = text_at(root, "prompt.user", where);
  t.task_readme = text_at(root, "task.readme", where);
  t.hardware_measured = text_at(root, "hardware.measured", where);
  t.hardware_unmeasured = text_at(root, "hardware.unmeasured", where);
  t.examples_intro_one = text_at(root, "examples.intro_one", where);
  t.examples_intro_many = text_at(root, "examples.intro_many", where);
  t.example_entry = text_at(root, "examples.entry", where);
  if (auto* backends = root["backends"].as_table()) {
    for (auto& [name, node] : *backends) {
      std::string path = "backends." + std::string(name.str());
      if (!node.as_table()) fail(Errc::parse_error, where + ": " + path + " must be a table");
      t.backends[std::string(name.str())] = {text_at(root, path + ".display", where), text_at(root, path + ".guidance", where),
                                             examples_of(*node.as_table(), path, where)};
    }
  }
  if (t.backends.empty()) fail(Errc::parse_error, where + ": no [backends.<name>] section");
  if (!t.backends.count(t.default_backend))
    fail(Errc::parse_error, where + ": meta.default_backend '" + t.default_backend + "' has no [backends] section");
  if (auto* precisions = root["precision"].as_table()) {
    for (auto& [name, node] : *precisions) {
      std::string path = "precision." + std::string(name.str());
      t.precisions[std::string(name.str())] = {text_at(root, path + ".display", where), text_at(root, path + ".notes", where)};
    }
  }
  for (FeedbackKind k : kAllFeedbackKinds) t.feedback[k] = text_at(root, "feedback." + std::string(to_string(k)), where);
  return t;
}

PromptTemplates load_templates(const std::filesystem::path& path) { return parse_templates(read_file(path), path.string()); }

std::filesystem::path templates_path(const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  if (const char* p = std::getenv("PKB_PROMPTS"); p && *p) return p;
  return pkb_home() / "prompts" / "prompts.toml";
}

const BackendTemplates& PromptTemplates::backend(const std::string& name) const {
  const std::string& key = name.empty() ? default_backend : name;
  auto it = backends.find(key);
  if (it == backends.end()) {
    std::string known;
    for (auto& [k, v] : backends) known += (known.empty() ? "" : ", ") + k;
    fail(Errc::invalid_argument, "unknown backend '" + key + "' (" + where + " defines: " + known + ")");
  }
  return it->second;
}

const PrecisionTemplates& PromptTemplates::precision(const std::string& dtype) const {
  auto it = precisions.find(dtype);
  if (it == precisions.end()) fail(Errc::invalid_argument, where + " has no [precision." + dtype + "] section");
  return it->second;
}

}  // namespace pkb
