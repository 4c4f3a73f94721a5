// Prompt text is data: templates with named placeholders, rendered by one small pure function.
//
// Syntax (as Python's str.format, without format specs):
//   {name}   replaced by the value of `name`; a name is [A-Za-z_][A-Za-z0-9_]*
//   {{  }}   a literal brace
// Any other brace is an error, so a typo such as "{problem summary}" is caught when the template is
// rendered instead of reaching a model. Values are inserted verbatim and never scanned again, so
// source code (full of braces) is safe inside a value.
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace pkb {

using TemplateVars = std::map<std::string, std::string, std::less<>>;

/// Renders `text`, replacing each {name} with vars[name]. `where` names the template in errors
/// (e.g. "prompts.toml [prompt].user"). Throws Error(invalid_argument) naming the placeholder, its
/// line and the names that are close, when a placeholder has no value; Error(parse_error) for a
/// stray or unclosed brace.
std::string render_template(std::string_view text, const TemplateVars& vars, std::string_view where);

/// The placeholder names a template uses (same syntax and errors as render_template).
std::set<std::string> template_placeholders(std::string_view text, std::string_view where);

}  // namespace pkb
