// What a rank's runner (the solution's process) may claim when it reports a failure to its checker.
#include <gtest/gtest.h>

#include "worker/runner.hpp"

namespace pkb::worker {
namespace {

TEST(Runner, ReportsOnlyTheFailuresItMayClaim) {
  for (bool over : {false, true}) {
    EXPECT_TRUE(runner_may_report(Status::runtime_error, true, over));
    EXPECT_TRUE(runner_may_report(Status::load_error, false, over));
    EXPECT_FALSE(runner_may_report(Status::load_error, true, over));
    EXPECT_TRUE(runner_may_report(Status::harness_error, false, over));
    EXPECT_FALSE(runner_may_report(Status::harness_error, true, over));  // once loaded, its failures are its own
    for (Status s : {Status::ok, Status::mismatch, Status::flagged, Status::timeout, Status::crash, Status::protocol_error,
                     Status::compile_error})
      EXPECT_FALSE(runner_may_report(s, true, over)) << to_string(s);  // verdicts are the checker's and the driver's
  }
  EXPECT_FALSE(runner_may_report(Status::unsupported, true, false));
  EXPECT_TRUE(runner_may_report(Status::unsupported, true, true));
}

}  // namespace
}  // namespace pkb::worker
