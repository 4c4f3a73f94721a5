// Runs the real `pkb` binary of this build for CLI tests.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/files.hpp"
#include "proc/process.hpp"

namespace pkb::testing {

struct PkbResult {
  int rc = -1;
  std::string out, err;
};

inline PkbResult run_pkb(const std::vector<std::string>& args, const fs::path& cwd,
                         std::vector<std::pair<std::string, std::string>> env = {}) {
  SpawnOptions o;
  o.argv = {std::string(PKB_TEST_BINARY_DIR) + "/bin/pkb"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.cwd = cwd;
  o.env_set = std::move(env);
  auto r = run_command(o, std::chrono::seconds(60));
  return {r.exit.exited ? r.exit.code : 128 + r.exit.signal, r.out, r.err};
}

}  // namespace pkb::testing
