// Where ranks run: one per GPU, or round-robin on fewer GPUs with --oversubscribe (and never
// without it: W > visible is refused with a message naming the flag).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "eval/evaluator.hpp"

namespace pkb {
namespace {

TEST(Placement, OneRankPerGpuWhenThereAreEnough) {
  Placement p = place_ranks(4, 8, false);
  EXPECT_FALSE(p.oversubscribed());
  EXPECT_EQ(p.gpus, 4);
  EXPECT_EQ(p.ranks_per_gpu(), 1);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(p.device_of(r), r);
  // The flag changes nothing where every rank has its own GPU.
  EXPECT_FALSE(place_ranks(4, 4, true).oversubscribed());
}

TEST(Placement, OversubscribedRanksGoRoundRobin) {
  Placement one = place_ranks(8, 1, true);
  EXPECT_TRUE(one.oversubscribed());
  EXPECT_EQ(one.gpus, 1);
  EXPECT_EQ(one.ranks_per_gpu(), 8);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(one.device_of(r), 0);
  Placement two = place_ranks(5, 2, true);
  EXPECT_EQ(two.ranks_per_gpu(), 3);
  std::vector<int> got;
  for (int r = 0; r < 5; ++r) got.push_back(two.device_of(r));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 0, 1, 0}));
}

TEST(Placement, MoreRanksThanGpusWithoutTheFlagIsRefusedAndNamesIt) {
  try {
    place_ranks(4, 1, false);
    FAIL() << "W = 4 on one GPU was accepted without --oversubscribe";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    std::string m = e.what();
    EXPECT_NE(m.find("--gpus 4 but only 1 GPU(s) are visible"), std::string::npos) << m;
    EXPECT_NE(m.find("--oversubscribe"), std::string::npos) << m;
  }
  EXPECT_THROW(place_ranks(2, 0, true), Error);
}

TEST(Placement, WorldIsTheFlagElseTheVisibleGpusElseTheSmallestWorldWhenOversubscribing) {
  EXPECT_EQ(world_for_run(4, 1, 2, false), 4);  // given: as given (place_ranks judges it)
  EXPECT_EQ(world_for_run(0, 8, 2, false), 8);
  EXPECT_EQ(world_for_run(0, 1, 2, false), 1);  // refused later, with the problem's range in the message
  EXPECT_EQ(world_for_run(0, 1, 2, true), 2);
  EXPECT_EQ(world_for_run(0, 2, 4, true), 4);
  EXPECT_EQ(world_for_run(0, 8, 4, true), 8);
}

}  // namespace
}  // namespace pkb
