// The driver's reading of the phase words workers announce: exactly the words name() writes.
#include "proto/phase.hpp"

#include <gtest/gtest.h>

namespace pkb {
namespace {

using K = Phase::Kind;

TEST(Phase, EveryPhaseReadsBackAsItsWord) {
  for (Phase p : {Phase{K::start}, Phase{K::setup}, Phase{K::load}, Phase{K::init}, Phase{K::trial, 0}, Phase{K::trial, 17},
                  Phase{K::timing}, Phase{K::profile}, Phase{K::finalize}, Phase{K::teardown}}) {
    auto back = Phase::parse(p.name());
    ASSERT_TRUE(back) << p.name();
    EXPECT_EQ(*back, p) << p.name();
  }
  EXPECT_EQ((Phase{K::trial, 3}.name()), "trial 3");
  EXPECT_NE((Phase{K::trial, 1}), (Phase{K::trial, 2}));
}

TEST(Phase, AnyOtherWordIsNoPhase) {
  for (const char* w : {"", "Setup", "trial", "trial ", "trial 03", "trial -1", "trial +1", "trial 1 ", "trial 1x",
                        "trial 1234567890", "timing ", " timing", "ready", "trial\t1"})
    EXPECT_FALSE(Phase::parse(w)) << "'" << w << "'";
}

}  // namespace
}  // namespace pkb
