// Containment of a job's processes in a control group, where the machine allows it (root, cgroup v2
// or v1 pids/memory hierarchies). A cgroup catches what process groups cannot: children that call
// setsid(), fork bombs (pids.max) and host memory bombs (memory.max, without RLIMIT_AS, which breaks
// CUDA). Where no cgroup can be made, jobs fall back to process groups and records say so.
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace pkb {

struct CgroupLimits {
  long max_pids = 0;  // tasks (threads count), 0: no limit
  long long max_memory_bytes = 0;  // host memory, 0: no limit
};

class JobCgroup {
 public:
  /// A fresh cgroup for one job, or nullptr (with the reason in *why) where none can be made.
  static std::unique_ptr<JobCgroup> create(const std::string& name, const CgroupLimits& limits, std::string* why);
  ~JobCgroup();  // kills what is left and removes the cgroup
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  /// "cgroup2" or "cgroup1".
  const std::string& kind() const { return kind_; }
  /// The cgroup.procs files a child writes its pid into before exec.
  const std::vector<std::string>& procs_files() const { return procs_; }
  /// Processes in the cgroup now.
  std::vector<pid_t> members() const;
  /// SIGKILL to every member until none is left (bounded); true if it emptied.
  bool kill_all();

 private:
  JobCgroup() = default;
  std::string kind_;
  std::vector<std::string> dirs_;  // one (v2) or one per v1 hierarchy
  std::vector<std::string> procs_;
};

/// Policy from the environment: PKB_CGROUP=off disables; PKB_JOB_MEMORY_GB (per rank, default 32)
/// and PKB_JOB_MAX_PIDS (per rank, default 2048) set the limits.
CgroupLimits job_limits_from_env(int world);
bool cgroups_enabled_by_env();

}  // namespace pkb
