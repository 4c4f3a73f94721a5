// The solution's process confinement: which paths stay readable, and (where the kernel has
// Landlock) that a confined process can read only outside the hidden tree, write only below the
// writable one, and signal nothing outside itself.
#include "proc/confine.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace pkb::confine {
namespace {

namespace fs = std::filesystem;

struct TempTree {
  fs::path root;
  TempTree() {
    char tmpl[] = "/tmp/pkb_confine_XXXXXX";
    root = fs::canonical(::mkdtemp(tmpl));
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void file(const fs::path& rel, const std::string& text = "x") {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
};

std::set<std::string> names(const std::vector<ReadRule>& rules, const fs::path& root) {
  std::set<std::string> out;
  for (auto& r : rules) out.insert(fs::relative(r.path, root).string() + (r.directory ? "/" : ""));
  return out;
}

TEST(Confine, ReadableExceptOpensUpOnlyTheDirectoriesAboveAHiddenOne) {
  TempTree t;
  t.file("a/b/secret/key");
  t.file("a/b/keep.txt");
  t.file("a/c/d.txt");
  t.file("x.txt");
  fs::create_directory_symlink(t.root / "a/b/secret", t.root / "link");
  auto rules = readable_except({t.root / "a/b/secret", t.root / "missing"}, t.root);
  EXPECT_EQ(names(rules, t.root), (std::set<std::string>{"a/b/keep.txt", "a/c/", "x.txt"}));
  // Nothing hidden: the root itself, whole.
  EXPECT_EQ(names(readable_except({}, t.root), t.root), (std::set<std::string>{"./"}));
  // A hidden file (not a directory) is left out alone; the hidden root leaves nothing.
  EXPECT_EQ(names(readable_except({t.root / "x.txt"}, t.root), t.root), (std::set<std::string>{"a/"}));
  EXPECT_TRUE(readable_except({t.root}, t.root).empty());
}

TEST(Confine, ThePlansListsBecomeThePolicyAndItsDescription) {
  Policy p = policy_of({"/var/cache/pkb"}, {"/dev", "/proc"});
  EXPECT_EQ(p.hidden, std::vector<std::filesystem::path>{"/var/cache/pkb"});
  EXPECT_EQ(p.writable, (std::vector<std::filesystem::path>{"/dev", "/proc"}));
  EXPECT_TRUE(p.readable_files.empty());
  std::string d = describe(p, 7);
  EXPECT_NE(d.find("landlock ABI 7"), std::string::npos) << d;
  EXPECT_NE(d.find("/dev"), std::string::npos) << d;
  EXPECT_NE(d.find("/proc"), std::string::npos) << d;
}

TEST(Confine, SecretEnvironmentNamesAreCredentialsOnly) {
  for (const char* n : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN",
                        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "DB_PASSWORD", "my_apikey", "GOOGLE_CREDENTIALS"})
    EXPECT_TRUE(secret_env_name(n)) << n;
  for (const char* n : {"PATH", "HOME", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "NCCL_IB_PKEY", "CUDA_VISIBLE_DEVICES",
                        "PKB_CACHE_DIR", "KEYBOARD", "MONKEY", "PKB_EMULATE_NODES"})
    EXPECT_FALSE(secret_env_name(n)) << n;
}

/// Runs `body` in a child process confined by `policy`; returns its exit code (bits: failed checks).
int in_confined_child(const Policy& policy, int (*body)(const fs::path&), const fs::path& root) {
  pid_t pid = ::fork();
  if (pid == 0) {
    try {
      apply(policy);
    } catch (...) {
      _exit(255);
    }
    _exit(body(root));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 254;
}

int confined_checks(const fs::path& root) {
  int bad = 0;
  auto opens = [](const fs::path& p, int flags) {
    int fd = ::open(p.c_str(), flags | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  if (opens(root / "hidden/record.key", O_RDONLY)) bad |= 1;  // the hidden tree is unreadable
  if (!opens(root / "public.txt", O_RDONLY)) bad |= 2;  // the rest is readable
  if (opens(root / "public.txt", O_WRONLY | O_APPEND)) bad |= 4;  // ... but not writable
  if (opens(root / "new.txt", O_WRONLY | O_CREAT)) bad |= 8;  // nothing new outside the writable tree
  if (!opens(root / "scratch/new.txt", O_WRONLY | O_CREAT)) bad |= 16;  // inside it, anything
  if (!opens(root / "hidden/solution.so", O_RDONLY)) bad |= 32;  // the one file granted below a hidden path
  if (landlock_abi() >= 6 && ::kill(::getppid(), 0) == 0) bad |= 64;  // no signal out of the domain
  if (!opens("/dev/null", O_WRONLY)) bad |= 128;
  return bad;
}

TEST(Confine, ConfinedProcessReadsWritesAndSignalsOnlyWhereAllowed) {
  if (landlock_abi() < 1) GTEST_SKIP() << "this kernel has no Landlock";
  TempTree t;
  t.file("hidden/record.key", "0123");
  t.file("hidden/solution.so", "elf");
  t.file("public.txt", "hello");
  fs::create_directories(t.root / "scratch");
  Policy p;
  p.hidden = {t.root / "hidden"};
  p.writable = {t.root / "scratch", "/dev"};
  p.readable_files = {t.root / "hidden/solution.so"};
  EXPECT_EQ(in_confined_child(p, confined_checks, t.root), 0);
  EXPECT_FALSE(fs::exists(t.root / "new.txt"));
  EXPECT_TRUE(fs::exists(t.root / "scratch/new.txt"));
  // Unconfined, the same checks fail: the secret is read, the file written, the parent signalled.
  EXPECT_EQ(confined_checks(t.root) & (1 | 4 | 8 | 64), 1 | 4 | 8 | (landlock_abi() >= 6 ? 64 : 0));
  // The text for the record names what was applied.
  std::string d = describe(p, landlock_abi());
  EXPECT_NE(d.find("writes only below " + (t.root / "scratch").string() + ", /dev"), std::string::npos) << d;
  EXPECT_NE(d.find("unreadable: " + (t.root / "hidden").string()), std::string::npos) << d;
}

TEST(Confine, AnUnopenableGrantIsAnError) {
  if (landlock_abi() < 1) GTEST_SKIP() << "this kernel has no Landlock";
  Policy p;
  p.writable = {"/nonexistent/pkb-confine-test"};
  auto fails = [](const fs::path&) { return 0; };
  EXPECT_EQ(in_confined_child(p, fails, "/"), 255);
}

}  // namespace
}  // namespace pkb::confine
