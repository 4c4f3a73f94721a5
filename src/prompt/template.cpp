#include "prompt/template.hpp"

#include <cctype>
#include <vector>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace pkb {

namespace {

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

size_t line_of(std::string_view text, size_t pos) {
  size_t line = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

/// One pass over the template: literal runs go to `literal`, placeholder names to `placeholder`.
/// Both callers (render and scan) share this, so they agree on the syntax.
template <typename OnLiteral, typename OnPlaceholder>
void scan(std::string_view text, std::string_view where, OnLiteral literal, OnPlaceholder placeholder) {
  auto bad = [&](size_t pos, const std::string& why) {
    fail(Errc::parse_error, std::string(where) + ", line " + std::to_string(line_of(text, pos)) + ": " + why +
                                " (write {{ or }} for a literal brace)");
  };
  size_t i = 0, run = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '{' && c != '}') {
      ++i;
      continue;
    }
    literal(text.substr(run, i - run));
    if (i + 1 < text.size() && text[i + 1] == c) {  // {{ or }}
      literal(text.substr(i, 1));
      i += 2;
    } else if (c == '}') {
      bad(i, "stray '}'");
    } else {
      size_t j = i + 1;
      if (j >= text.size() || !name_start(text[j])) bad(i, "'{' must start a placeholder such as {name}");
      while (j < text.size() && name_char(text[j])) ++j;
      if (j >= text.size() || text[j] != '}')
        bad(i, "placeholder '{" + std::string(text.substr(i + 1, j - i - 1)) + "' is not closed by '}'");
      placeholder(text.substr(i + 1, j - i - 1), i);
      i = j + 1;
    }
    run = i;
  }
  literal(text.substr(run));
}

}  // namespace

std::string render_template(std::string_view text, const TemplateVars& vars, std::string_view where) {
  std::string out;
  out.reserve(text.size());
  scan(
      text, where, [&](std::string_view lit) { out.append(lit); },
      [&](std::string_view name, size_t pos) {
        auto it = vars.find(name);
        if (it == vars.end()) {
          std::vector<std::string> names;
          for (auto& [k, v] : vars) names.push_back(k);
          auto near = closest_matches(name, names);
          fail(Errc::invalid_argument, std::string(where) + ", line " + std::to_string(line_of(text, pos)) +
                                           ": no value for placeholder {" + std::string(name) + "}" +
                                           (near.empty() ? "" : "; did you mean {" + near[0] + "}?"));
        }
        out.append(it->second);
      });
  return out;
}

std::set<std::string> template_placeholders(std::string_view text, std::string_view where) {
  std::set<std::string> names;
  scan(
      text, where, [](std::string_view) {}, [&](std::string_view name, size_t) { names.emplace(name); });
  return names;
}

}  // namespace pkb
