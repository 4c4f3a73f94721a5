#include "proc/confine.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"

namespace pkb::confine {

namespace fs = std::filesystem;

namespace {

// The kernel's Landlock interface (include/uapi/linux/landlock.h), spelled out here so that pkb
// builds against C library headers older than the kernel it runs on. System call numbers are the
// same on every architecture.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;  // ABI 4
  uint64_t scoped = 0;  // ABI 6
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

constexpr uint64_t kExecute = 1ull << 0, kWriteFile = 1ull << 1, kReadFile = 1ull << 2, kReadDir = 1ull << 3;
constexpr uint64_t kAbi1All = (1ull << 13) - 1;  // EXECUTE ... MAKE_SYM
constexpr uint64_t kRefer = 1ull << 13;  // ABI 2
constexpr uint64_t kTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kIoctlDev = 1ull << 15;  // ABI 5
constexpr uint64_t kScopeSignal = 1ull << 1;  // ABI 6

/// Every file system right this ABI knows: all of them are restricted, and granted back by rules.
uint64_t handled_fs(int abi) {
  uint64_t r = kAbi1All;
  if (abi >= 2) r |= kRefer;
  if (abi >= 3) r |= kTruncate;
  if (abi >= 5) r |= kIoctlDev;
  return r;
}

/// The rights that apply to a regular file (a rule on a file may grant only these).
uint64_t file_rights(int abi) { return handled_fs(abi) & (kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev); }

bool below(const fs::path& p, const fs::path& dir) {  // p is dir or under it
  auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return d == dir.end();
}

std::vector<fs::path> existing_canonical(const std::vector<fs::path>& paths) {
  std::vector<fs::path> out;
  for (auto& p : paths) {
    std::error_code ec;
    fs::path c = fs::canonical(p, ec);
    if (!ec) out.push_back(c);
  }
  return out;
}

void cover(const fs::path& dir, const std::vector<fs::path>& hidden, std::vector<ReadRule>& out) {
  for (auto& h : hidden)
    if (h == dir) return;
  bool above = std::any_of(hidden.begin(), hidden.end(), [&](const fs::path& h) { return below(h, dir); });
  if (!above) {
    out.push_back({dir, true});
    return;
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::directory_entry& e = *it;
    std::error_code sec;
    if (e.is_symlink(sec)) continue;
    if (e.is_directory(sec)) {
      cover(e.path(), hidden, out);
    } else if (std::none_of(hidden.begin(), hidden.end(), [&](const fs::path& h) { return h == e.path(); })) {
      out.push_back({e.path(), false});
    }
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Grants `rights` below `path` (or on the file); false where the path cannot be opened (then it
/// was out of reach anyway) or the kernel refuses it.
bool add_rule(int ruleset, const fs::path& path, uint64_t rights) {
  Fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (fd.get() < 0) return false;
  PathBeneathAttr attr{rights, fd.get()};
  return ::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &attr, 0) == 0;
}

std::string join(const std::vector<fs::path>& paths) {
  std::string s;
  for (auto& p : paths) s += (s.empty() ? "" : ", ") + p.string();
  return s.empty() ? "(none)" : s;
}

}  // namespace

int landlock_abi() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? 0 : static_cast<int>(v);
}

std::vector<ReadRule> readable_except(const std::vector<fs::path>& hidden, const fs::path& root) {
  std::vector<ReadRule> out;
  cover(root, existing_canonical(hidden), out);
  return out;
}

Policy policy_of(const std::vector<std::string>& hidden, const std::vector<std::string>& writable) {
  Policy p;
  p.hidden.assign(hidden.begin(), hidden.end());
  p.writable.assign(writable.begin(), writable.end());
  return p;
}

std::string describe(const Policy& policy, int abi) {
  return "landlock ABI " + std::to_string(abi) + ": writes only below " + join(policy.writable) +
         "; unreadable: " + join(existing_canonical(policy.hidden)) +
         (abi >= 6 ? "; no ptrace or signal out of the solution's processes"
                   : "; no ptrace out of the solution's processes (signals need ABI 6)");
}

std::string apply(const Policy& policy) {
  const int abi = landlock_abi();
  if (abi < 1) fail(Errc::io_error, "this kernel has no Landlock (Linux 5.13 or later with the landlock LSM enabled)");
  // Landlock restricts the calling thread and what it starts: a thread already running would stay free.
  std::error_code ec;
  auto threads = std::distance(fs::directory_iterator("/proc/self/task", ec), fs::directory_iterator());
  if (!ec && threads != 1)
    fail(Errc::io_error, "landlock: the process has " + std::to_string(threads) + " threads; it must be confined with one");
  RulesetAttr attr;
  attr.handled_access_fs = handled_fs(abi);
  if (abi >= 6) attr.scoped = kScopeSignal;
  // Older kernels take the longer struct as long as the fields they do not know are zero.
  int rs = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (rs < 0) fail(Errc::io_error, std::string("landlock_create_ruleset: ") + std::strerror(errno));
  Fd ruleset(rs);
  const uint64_t read_dir = (kReadFile | kReadDir | kExecute) & attr.handled_access_fs;
  const uint64_t read_file = (kReadFile | kExecute) & attr.handled_access_fs;
  for (const ReadRule& r : readable_except(policy.hidden)) add_rule(rs, r.path, r.directory ? read_dir : read_file);
  for (auto& f : policy.readable_files)
    if (!add_rule(rs, f, read_file)) fail(Errc::io_error, "landlock: cannot grant reading " + f.string());
  for (auto& w : policy.writable) {
    std::error_code ec;
    bool dir = fs::is_directory(w, ec);
    if (!add_rule(rs, w, dir ? attr.handled_access_fs : file_rights(abi)))
      fail(Errc::io_error, "landlock: cannot grant writing below " + w.string());
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    fail(Errc::io_error, std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno));
  if (::syscall(SYS_landlock_restrict_self, rs, 0) != 0)
    fail(Errc::io_error, std::string("landlock_restrict_self: ") + std::strerror(errno));
  return describe(policy, abi);
}

bool secret_env_name(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("NCCL_", 0) == 0 || up.rfind("CUDA_", 0) == 0) return false;
  static const char* kWords[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"};
  size_t start = 0;
  while (start <= up.size()) {
    size_t end = up.find_first_of("_-.", start);
    if (end == std::string::npos) end = up.size();
    std::string_view word(up.data() + start, end - start);
    for (const char* w : kWords)
      if (word == w) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace pkb::confine
