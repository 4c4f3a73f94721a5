// Interleaved timing: the gate's turn-taking and the round statistics.
#include "eval/gate.hpp"

#include <gtest/gtest.h>

#include "eval/internal.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace pkb {
namespace {

/// Two jobs of `world` ranks, each rank committing call -1 (ready) and then each timed call as soon
/// as its previous commit is answered, in a fixed sweep order. Returns the order in which calls
/// ran as (job, call), a call counted once all its ranks ran it; `leave_at` makes job 1 leave after
/// that many of its calls.
std::vector<std::pair<int, int>> simulate(int world, int round, int iters, int leave_at = -1) {
  CallGate gate(world, round);
  // next[j][r]: the call rank r of job j runs next; answered[j][r]: its last commit was answered.
  std::vector<std::vector<int>> next(2, std::vector<int>(world, -1));
  std::vector<std::vector<bool>> waiting(2, std::vector<bool>(world, false));
  std::vector<std::pair<int, int>> order;
  bool left = false;
  for (int guard = 0; guard < 100000; ++guard) {
    bool moved = false;
    for (int j = 0; j < 2; ++j) {
      if (j == 1 && left) continue;
      for (int r = 0; r < world; ++r) {
        int c = next[j][r];
        if (c > iters) continue;  // finished
        if (!waiting[j][r]) {  // run call c (or get ready) and commit it
          gate.committed(j, 0, r, c);
          waiting[j][r] = true;
          moved = true;
          bool all = true;
          for (int q = 0; q < world; ++q) all &= next[j][q] == c && waiting[j][q];
          if (all && c >= 0) order.push_back({j, c});
          if (j == 1 && all && c + 1 == leave_at) {
            gate.leave(1);
            left = true;
          }
        } else if (gate.may_answer(j, 0, c, iters)) {
          waiting[j][r] = false;
          next[j][r] = c + 1 == iters ? iters + 1 : c + 1;
          moved = true;
        }
      }
    }
    if (!moved) break;
  }
  return order;
}

TEST(CallGate, JobsTakeTurnsInRoundsAfterBothWarmedUp) {
  auto order = simulate(2, 2, 6);
  std::vector<std::pair<int, int>> want{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3},
                                        {1, 2}, {1, 3}, {0, 4}, {0, 5}, {1, 4}, {1, 5}};
  EXPECT_EQ(order, want);
}

TEST(CallGate, AShortLastRoundAndRoundsLongerThanTheRun) {
  auto order = simulate(3, 4, 6);  // rounds [0, 4) and [4, 6)
  std::vector<std::pair<int, int>> want{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1},
                                        {1, 2}, {1, 3}, {0, 4}, {0, 5}, {1, 4}, {1, 5}};
  EXPECT_EQ(order, want);
  auto one = simulate(2, 10, 3);  // a single round each
  std::vector<std::pair<int, int>> want1{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  EXPECT_EQ(one, want1);
}

TEST(CallGate, NoTimedCallBeforeTheOtherJobIsReady) {
  CallGate gate(2, 1);
  gate.committed(0, 0, 0, -1);
  gate.committed(0, 0, 1, -1);
  EXPECT_FALSE(gate.may_answer(0, 0, -1, 4)) << "the candidate is still warming up";
  gate.committed(1, 0, 0, -1);
  EXPECT_FALSE(gate.may_answer(0, 0, -1, 4));
  gate.committed(1, 0, 1, -1);
  EXPECT_TRUE(gate.may_answer(0, 0, -1, 4));
  EXPECT_FALSE(gate.may_answer(1, 0, -1, 4)) << "the baseline's first round comes first";
}

TEST(CallGate, AJobThatLeavesNoLongerHoldsTheOtherUp) {
  auto order = simulate(2, 1, 5, /*leave_at=*/2);
  // Job 1 ran calls 0 and 1, then left: job 0 runs the rest back to back.
  std::vector<std::pair<int, int>> want{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {0, 3}, {0, 4}};
  EXPECT_EQ(order, want);
  CallGate gate(2, 3);
  gate.leave(0);
  EXPECT_TRUE(gate.may_answer(1, 0, -1, 9));
  EXPECT_TRUE(gate.may_answer(1, 0, 8, 9));
}

TEST(CallGate, TheLastAnswerWaitsForTheOtherJobsLastCall) {
  CallGate gate(1, 1);
  for (int j = 0; j < 2; ++j) gate.committed(j, 0, 0, -1);
  gate.committed(0, 0, 0, 0);
  gate.committed(0, 0, 0, 1);  // as if job 0 had been let through: its run is over
  EXPECT_FALSE(gate.may_answer(0, 0, 1, 2)) << "job 1 has not run its calls";
  gate.committed(1, 0, 0, 0);
  EXPECT_FALSE(gate.may_answer(0, 0, 1, 2));
  gate.committed(1, 0, 0, 1);
  EXPECT_TRUE(gate.may_answer(0, 0, 1, 2));
  EXPECT_TRUE(gate.may_answer(1, 0, 1, 2));
}

TEST(CallGate, RefusesNonsense) {
  EXPECT_THROW(CallGate(0, 1), std::invalid_argument);
  EXPECT_THROW(CallGate(2, 0), std::invalid_argument);
}

TEST(RoundSpeedup, MedianOfRoundRatiosWithAnOrderStatisticInterval) {
  // Six rounds of two calls; the candidate twice as fast except in one noisy round.
  std::vector<double> base{10, 10, 10, 10, 10, 10, 10, 10, 30, 30, 10, 10};
  std::vector<double> cand{5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4};
  auto s = round_speedup(base, cand, 2);
  EXPECT_EQ(s.rounds, 6);
  EXPECT_DOUBLE_EQ(s.median, 2.0);  // ratios 2 2 2 2 6 2.5
  // With 6 rounds the 95 % interval is [min, max] (P(all on one side) = 1/64 per side).
  EXPECT_DOUBLE_EQ(s.lo, 2.0);
  EXPECT_DOUBLE_EQ(s.hi, 6.0);
  // Five rounds cannot give a 95 % interval (1/32 > 2.5 %).
  auto five = round_speedup({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, 1);
  EXPECT_EQ(five.rounds, 5);
  EXPECT_DOUBLE_EQ(five.median, 1.0);
  EXPECT_EQ(five.lo, 0.0);
  EXPECT_EQ(five.hi, 0.0);
}

TEST(RoundSpeedup, TheIntervalNarrowsWithRounds) {
  // 40 rounds of ratios 1.00 .. 1.39: the interval drops the extreme ones.
  std::vector<double> base, cand;
  for (int k = 0; k < 40; ++k) {
    base.push_back(1.0 + 0.01 * ((k * 17) % 40));
    cand.push_back(1.0);
  }
  auto s = round_speedup(base, cand, 1);
  EXPECT_EQ(s.rounds, 40);
  EXPECT_NEAR(s.median, 1.195, 1e-12);
  // P(Binomial(40, 1/2) <= 13) = 0.019 <= 2.5 % < P(<= 14) = 0.040: [r_(14), r_(27)].
  EXPECT_NEAR(s.lo, 1.13, 1e-12);
  EXPECT_NEAR(s.hi, 1.26, 1e-12);
  EXPECT_EQ(round_speedup({}, {}, 1).rounds, 0);
}

// The baseline failed beside the candidate's job and passed alone: the candidate is charged. Its own
// failure, if it has one, is the verdict; else `flagged`. Failing alone too, it is pkb's problem and
// the record is left as it was.
TEST(Interference, ABaselineThatPassesAloneChargesTheCandidate) {
  JobResult beside, alone, cand;
  beside.status = Status::runtime_error;
  beside.message = "rank 0: cudaMalloc: out of memory";
  beside.rank = 0;
  beside.phase = "init";

  EvalRecord r;
  ASSERT_TRUE(detail::charge_interference(beside, alone, cand, r));
  EXPECT_EQ(r.status, Status::flagged);
  EXPECT_NE(r.message.find("passed alone"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("out of memory"), std::string::npos) << r.message;
  EXPECT_EQ(r.failed_rank, 0);

  cand.status = Status::mismatch;
  cand.message = "trial 0 rank 1 output 'out' vs baseline";
  EvalRecord m;
  ASSERT_TRUE(detail::charge_interference(beside, alone, cand, m));
  EXPECT_EQ(m.status, Status::mismatch);
  EXPECT_EQ(m.message, cand.message);
  EXPECT_TRUE(std::any_of(m.warnings.begin(), m.warnings.end(),
                          [](const std::string& w) { return w.find("passed alone") != std::string::npos; }));

  alone.status = Status::runtime_error;
  EvalRecord h;
  EXPECT_FALSE(detail::charge_interference(beside, alone, cand, h));
  EXPECT_EQ(h.status, Status::ok);
  EXPECT_TRUE(h.message.empty());
}

}  // namespace
}  // namespace pkb
