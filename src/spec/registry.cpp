#include "spec/registry.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/strings.hpp"

namespace pkb {

std::filesystem::path problems_dir(const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  if (const char* d = std::getenv("PKB_PROBLEMS_DIR"); d && *d) return d;
  return pkb_home() / "problems";
}

std::vector<ProblemEntry> discover_problems(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail(Errc::not_found, "problems directory " + dir.string() + " does not exist (set --problems-dir or PKB_PROBLEMS_DIR)");
  std::vector<ProblemEntry> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_directory()) continue;
    std::string stem = e.path().filename().string();
    size_t us = stem.find('_');
    if (us == std::string::npos || us == 0) continue;
    if (!std::all_of(stem.begin(), stem.begin() + static_cast<long>(us),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      continue;
    if (!std::filesystem::exists(e.path() / "spec.toml")) continue;
    out.push_back({std::stoi(stem.substr(0, us)), stem, stem.substr(us + 1), e.path()});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

const ProblemEntry& find_problem(const std::vector<ProblemEntry>& all, const std::string& query) {
  std::string q = query;
  // Accept a path to a problem folder or its spec.toml.
  std::filesystem::path p(q);
  if (p.filename() == "spec.toml") p = p.parent_path();
  if (p.has_parent_path()) q = p.filename().string();
  bool numeric =
      !q.empty() && std::all_of(q.begin(), q.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  for (auto& e : all) {
    if (numeric && e.id == std::stoi(q)) return e;
    if (e.stem == q || e.name == q) return e;
  }
  std::vector<std::string> names;
  for (auto& e : all) {
    names.push_back(e.stem);
    names.push_back(e.name);
  }
  auto near = closest_matches(q, names);
  std::string msg = "unknown problem '" + query + "'";
  if (!near.empty()) {
    msg += "; did you mean ";
    for (size_t i = 0; i < near.size(); ++i) msg += (i ? ", " : "") + near[i];
    msg += "?";
  } else {
    msg += " (`pkb list` shows all " + std::to_string(all.size()) + ")";
  }
  fail(Errc::invalid_argument, msg);
}

}  // namespace pkb
