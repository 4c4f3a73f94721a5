// Problem discovery: every folder <id>_<name> with a spec.toml under the problems directory.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace pkb {

struct ProblemEntry {
  int id = 0;
  std::string stem;  // "1_allreduce"
  std::string name;  // "allreduce"
  std::filesystem::path dir;
};

/// The problems directory: `override` if given, else $PKB_PROBLEMS_DIR, else <pkb home>/problems.
std::filesystem::path problems_dir(const std::string& override_dir = {});

/// All problem folders, sorted by id.
std::vector<ProblemEntry> discover_problems(const std::filesystem::path& dir);

/// Finds a problem by id ("1"), stem ("1_allreduce"), name ("allreduce") or spec file path.
/// Throws Error(invalid_argument) with the closest names when nothing matches.
const ProblemEntry& find_problem(const std::vector<ProblemEntry>& all, const std::string& query);

}  // namespace pkb
