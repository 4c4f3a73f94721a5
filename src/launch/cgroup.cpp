#include "launch/cgroup.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pkb {

namespace fs = std::filesystem;

namespace {

bool write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  if (!f) return false;
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s;
}

bool is_cgroup2_root(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p / "cgroup.controllers", ec) && fs::exists(p / "cgroup.procs", ec);
}

}  // namespace

std::unique_ptr<JobCgroup> JobCgroup::create(const std::string& name, const CgroupLimits& limits, std::string* why) {
  std::unique_ptr<JobCgroup> cg(new JobCgroup());
  std::error_code ec;
  // cgroup v2: unified at /sys/fs/cgroup, or beside v1 at /sys/fs/cgroup/unified.
  for (const fs::path& root : {fs::path("/sys/fs/cgroup"), fs::path("/sys/fs/cgroup/unified")}) {
    if (!is_cgroup2_root(root)) continue;
    std::string controllers = read_text(root / "cgroup.controllers");
    bool pids = controllers.find("pids") != std::string::npos, memory = controllers.find("memory") != std::string::npos;
    if (pids || memory)
      write_text(root / "cgroup.subtree_control", std::string(pids ? "+pids " : "") + (memory ? "+memory" : ""));
    fs::path dir = root / name;
    if (!fs::create_directory(dir, ec)) continue;
    if (limits.max_pids > 0 && fs::exists(dir / "pids.max", ec)) write_text(dir / "pids.max", std::to_string(limits.max_pids));
    if (limits.max_memory_bytes > 0 && fs::exists(dir / "memory.max", ec)) {
      write_text(dir / "memory.max", std::to_string(limits.max_memory_bytes));
      write_text(dir / "memory.swap.max", "0");
    }
    cg->kind_ = "cgroup2";
    cg->dirs_ = {dir.string()};
    cg->procs_ = {(dir / "cgroup.procs").string()};
    return cg;
  }
  // cgroup v1: the pids and memory hierarchies.
  for (const char* h : {"pids", "memory"}) {
    fs::path root = fs::path("/sys/fs/cgroup") / h;
    if (!fs::exists(root / "cgroup.procs", ec)) continue;
    fs::path dir = root / name;
    if (!fs::create_directory(dir, ec)) continue;
    if (std::string(h) == "pids" && limits.max_pids > 0) write_text(dir / "pids.max", std::to_string(limits.max_pids));
    if (std::string(h) == "memory" && limits.max_memory_bytes > 0)
      write_text(dir / "memory.limit_in_bytes", std::to_string(limits.max_memory_bytes));
    cg->dirs_.push_back(dir.string());
    cg->procs_.push_back((dir / "cgroup.procs").string());
  }
  if (!cg->dirs_.empty()) {
    cg->kind_ = "cgroup1";
    return cg;
  }
  if (why) *why = "no writable cgroup v2 or v1 (pids, memory) hierarchy";
  return nullptr;
}

std::vector<pid_t> JobCgroup::members() const {
  std::vector<pid_t> out;
  for (auto& p : procs_) {
    std::ifstream f(p);
    for (long pid; f >> pid;)
      if (std::find(out.begin(), out.end(), static_cast<pid_t>(pid)) == out.end()) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

bool JobCgroup::kill_all() {
  if (kind_ == "cgroup2") write_text(fs::path(dirs_[0]) / "cgroup.kill", "1");
  for (int round = 0; round < 200; ++round) {
    auto pids = members();
    if (pids.empty()) return true;
    for (pid_t p : pids) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return members().empty();
}

JobCgroup::~JobCgroup() {
  kill_all();
  std::error_code ec;
  for (int i = 0; i < 100; ++i) {
    bool all = true;
    for (auto& d : dirs_) all &= !fs::exists(d, ec) || fs::remove(d, ec);
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

CgroupLimits job_limits_from_env(int world) {
  CgroupLimits l;
  long long mem_gb = 32, pids = 2048;
  if (const char* m = std::getenv("PKB_JOB_MEMORY_GB")) mem_gb = std::atoll(m);
  if (const char* p = std::getenv("PKB_JOB_MAX_PIDS")) pids = std::atoll(p);
  l.max_memory_bytes = mem_gb > 0 ? mem_gb * world * (1ll << 30) : 0;
  l.max_pids = pids > 0 ? static_cast<long>(pids * world) : 0;
  return l;
}

bool cgroups_enabled_by_env() {
  const char* c = std::getenv("PKB_CGROUP");
  return !(c && std::string(c) == "off");
}

}  // namespace pkb
