// What the driver asks the runners to confine themselves to, and what the record then says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "core/files.hpp"
#include "eval/internal.hpp"
#include "proc/confine.hpp"

namespace pkb::detail {
namespace {

struct Env {
  const char* name;
  std::string saved;
  bool had;
  Env(const char* n, const char* value) : name(n), had(std::getenv(n) != nullptr) {
    if (had) saved = std::getenv(n);
    if (value) ::setenv(n, value, 1);
    else ::unsetenv(n);
  }
  ~Env() {
    if (had) ::setenv(name, saved.c_str(), 1);
    else ::unsetenv(name);
  }
};

TEST(Confinement, OnWhereTheKernelHasLandlockWithAnAbsoluteHiddenCache) {
  Env sandbox("PKB_SANDBOX", nullptr);
  Env cache("PKB_CACHE_DIR", "relative-cache");  // resolved by the driver, not by the runner's cwd
  Confinement c = runner_confinement();
  if (confine::landlock_abi() < 1) {
    EXPECT_FALSE(c.enabled);
    return;
  }
  ASSERT_TRUE(c.enabled);
  ASSERT_EQ(c.hidden.size(), 1u);
  EXPECT_EQ(c.hidden[0], (std::filesystem::current_path() / "relative-cache").string());
  EXPECT_EQ(c.writable, (std::vector<std::string>{"/dev", "/proc"}));
}

TEST(Confinement, OffWithTheSandbox) {
  Env sandbox("PKB_SANDBOX", "off");
  EXPECT_FALSE(runner_confinement().enabled);
  JobResult r;
  r.sandbox = "not isolated: sandboxing is off (PKB_SANDBOX=off)";
  note_confinement(r, {});
  EXPECT_EQ(r.sandbox, "not isolated: sandboxing is off (PKB_SANDBOX=off)");  // nothing added
  EXPECT_FALSE(r.isolated);
}

TEST(Confinement, TheRecordNamesItAndAConfinedJobIsIsolated) {
  Env sandbox("PKB_SANDBOX", nullptr);
  Confinement c{true, {"/nonexistent-pkb-cache"}, {"/dev", "/proc"}};
  JobResult own;  // workers as the driver's user
  own.sandbox = "not isolated: pkb is not root, so its workers run as its own user";
  note_confinement(own, c);
  EXPECT_TRUE(own.isolated);
  EXPECT_EQ(own.sandbox.rfind("the driver's user (uid " + std::to_string(geteuid()) + "), no_new_privs; landlock ABI ", 0), 0u)
      << own.sandbox;
  EXPECT_NE(own.sandbox.find("writes only below /dev, /proc"), std::string::npos) << own.sandbox;
  JobResult nobody;  // a root driver's workers
  nobody.sandbox = "user nobody (uid 65534), no_new_privs";
  nobody.isolated = true;
  note_confinement(nobody, c);
  EXPECT_EQ(nobody.sandbox.rfind("user nobody (uid 65534), no_new_privs; landlock ABI ", 0), 0u) << nobody.sandbox;
  // Wanted, but the kernel cannot: the warning's text says so.
  JobResult bare;
  bare.sandbox = "not isolated: pkb is not root";
  note_confinement(bare, {});
  EXPECT_FALSE(bare.isolated);
  EXPECT_EQ(bare.sandbox, "not isolated: pkb is not root; this kernel has no Landlock to confine them");
}

}  // namespace
}  // namespace pkb::detail
