// Confining the process that hosts a solution (the runner, worker/runner.hpp) with the kernel's
// Landlock LSM, so that whichever user it runs as it can write only where GPUs and NCCL need to,
// cannot read pkb's cache (the record key, other candidates' builds), and cannot signal or ptrace
// any process outside itself (the checker, the driver, other jobs). See docs/evaluation.md,
// "Containment". Landlock needs no privilege and no package; on a kernel without it nothing is
// applied and the record says so.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pkb::confine {

/// The Landlock ABI version this kernel offers; 0 where it has none or it is disabled.
int landlock_abi();

struct Policy {
  /// Neither readable nor writable, with everything below them (paths that do not exist are left out).
  std::vector<std::filesystem::path> hidden;
  /// Readable and writable (create, remove, rename...) below them; everything else is read-only.
  std::vector<std::filesystem::path> writable;
  /// Files readable and executable even below a hidden path (the solution's shared object).
  std::vector<std::filesystem::path> readable_files;
};

/// A policy from the plan's lists of paths (proto's Confinement), with no readable files.
Policy policy_of(const std::vector<std::string>& hidden, const std::vector<std::string>& writable);

/// The directories and files under `root` that, granted read access with everything below them,
/// make every path readable except those under `hidden`: a path that is neither hidden nor above a
/// hidden one is taken whole; one above a hidden path is opened up into its entries. Symbolic links
/// are left out (what they point to is judged by its own path).
struct ReadRule {
  std::filesystem::path path;
  bool directory = false;
};
std::vector<ReadRule> readable_except(const std::vector<std::filesystem::path>& hidden, const std::filesystem::path& root = "/");

/// Restricts the calling thread, and every thread and process it starts from now on, to `policy`
/// (call it while the process has one thread, so that it covers the whole process). Also sets
/// no_new_privs. Returns what was applied, in words for the record; throws Error(io_error) when
/// the kernel has no Landlock, refuses the rules, or the process has more than one thread.
std::string apply(const Policy& policy);

/// What `apply` does at this ABI, in words (the same text it returns).
std::string describe(const Policy& policy, int abi);

/// Whether an environment variable of this name looks like a credential (a word KEY, TOKEN,
/// SECRET, PASSWORD, PASSWD, CREDENTIAL or CREDENTIALS in it, as in OPENAI_API_KEY or HF_TOKEN);
/// NCCL_ and CUDA_ variables never are. The solution's process starts without them.
bool secret_env_name(std::string_view name);

}  // namespace pkb::confine
