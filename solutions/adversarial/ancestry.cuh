// The processes above the solution's, seen through /proc as any process can: the chain of parent
// pids, each one's command line and (where the kernel lets it) its environment. Used by the cases
// that go after the driver's files and secrets.
#pragma once
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ancestry {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> split0(const std::string& s) {
  std::vector<std::string> out;
  std::string a;
  for (char c : s) {
    if (c) a += c;
    else { out.push_back(a); a.clear(); }
  }
  return out;
}

/// The parent of `pid` (field 4 of /proc/<pid>/stat), 0 when unknown.
inline int parent_of(int pid) {
  std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = st.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(st.substr(close + 2));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

/// This process's ancestors, nearest first (the checker, the driver, ...), up to init.
inline std::vector<int> ancestors() {
  std::vector<int> out;
  for (int p = getppid(); p > 1 && out.size() < 16; p = parent_of(p)) out.push_back(p);
  return out;
}

inline std::vector<std::string> cmdline(int pid) { return split0(slurp("/proc/" + std::to_string(pid) + "/cmdline")); }
inline std::vector<std::string> environ_of(int pid) { return split0(slurp("/proc/" + std::to_string(pid) + "/environ")); }

/// The value after `flag` in the nearest ancestor's command line that has it ("" if none does).
inline std::string ancestor_arg(const std::string& flag) {
  for (int pid : ancestors()) {
    auto args = cmdline(pid);
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag) return args[i + 1];
  }
  return "";
}

}  // namespace ancestry
