#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/numeric.hpp"
#include "core/poison.hpp"
#include "eval/compare.hpp"
#include "eval/sweep.hpp"

namespace pkb {
namespace {

std::string f32(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

TEST(Compare, ToleranceRuleIsAbsPlusRelOfExpected) {
  Tolerance tol{0.01, 0.01};
  // |got - exp| <= 0.01 + 0.01 * |exp|: at exp = 100 the allowance is 1.01.
  EXPECT_TRUE(compare_bytes(f32({101.0f}), f32({100.0f}), DType::fp32, tol).ok());
  EXPECT_FALSE(compare_bytes(f32({101.02f}), f32({100.0f}), DType::fp32, tol).ok());
  EXPECT_TRUE(compare_bytes(f32({0.0099f}), f32({0.0f}), DType::fp32, tol).ok());
  EXPECT_FALSE(compare_bytes(f32({0.0101f}), f32({0.0f}), DType::fp32, tol).ok());
}

TEST(Compare, ReportsWorstAndFirstMismatch) {
  auto s = compare_bytes(f32({1, 2, 3, 4, 5, 6}), f32({1, 2, 3.5f, 4, 5, 9}), DType::fp32, {0.01, 0.01});
  EXPECT_EQ(s.mismatches, 2u);
  EXPECT_EQ(s.first_bad, 2);
  EXPECT_FLOAT_EQ(s.got, 3);
  EXPECT_FLOAT_EQ(s.expected, 3.5);
  EXPECT_DOUBLE_EQ(s.max_abs, 3.0);
  EXPECT_EQ(format_index(5, {2, 3}), "[1, 2]");
  EXPECT_NE(describe_mismatch(s, {2, 3}).find("first at [0, 2]"), std::string::npos);
}

TEST(Compare, NonFiniteRules) {
  float inf = INFINITY, nan = NAN;
  EXPECT_TRUE(compare_bytes(f32({nan, inf, -inf}), f32({nan, inf, -inf}), DType::fp32, {0.01, 0.01}).ok());
  EXPECT_FALSE(compare_bytes(f32({1}), f32({nan}), DType::fp32, {0.01, 0.01}).ok());
  EXPECT_FALSE(compare_bytes(f32({inf}), f32({-inf}), DType::fp32, {0.01, 0.01}).ok());
  auto s = compare_bytes(f32({nan}), f32({1}), DType::fp32, {0.01, 0.01});
  EXPECT_EQ(s.nonfinite, 1u);
}

TEST(Compare, PoisonedElementsAreUnwritten) {
  uint64_t p = poison_pattern(DType::bf16, 12345);
  std::vector<uint16_t> got{num::float_to_bf16(1.0f), static_cast<uint16_t>(p)};
  std::vector<uint16_t> exp{num::float_to_bf16(1.0f), num::float_to_bf16(2.0f)};
  std::string g(reinterpret_cast<char*>(got.data()), 4), e(reinterpret_cast<char*>(exp.data()), 4);
  auto s = compare_bytes(g, e, DType::bf16, {0.01, 0.01}, p);
  EXPECT_EQ(s.unwritten, 1u);
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_FALSE(s.ok());
}

TEST(Compare, AgainstOracleValues) {
  auto s = compare_to_values(f32({1.0f, 2.0f}), DType::fp32, {1.0, 2.5}, {0.01, 0.01});
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.first_bad, 1);
}

std::string i64(std::vector<int64_t> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8); }

TEST(Compare, IntegerOutputsAreExactByDefault) {
  // Under the problem's tolerance, 100001 vs 100000 would pass (1e-2 + 1e-2 * 1e5 = 1000): integers
  // do not take it.
  Tolerance problem{0.01, 0.01};
  EXPECT_TRUE(compare_bytes(i64({7, 100000}), i64({7, 100000}), DType::i64, problem).ok());
  auto s = compare_bytes(i64({7, 100001}), i64({7, 100000}), DType::i64, problem);
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.first_bad, 1);
  EXPECT_FALSE(compare_to_values(i64({7, 100001}), DType::i64, {7, 100000}, problem).ok());
  // Exact integers compare bits: 2^53 + 1 and 2^53 are one double.
  const int64_t big = int64_t{1} << 53;
  Comparison exact{CompareMode::exact, {0, 0}};
  EXPECT_FALSE(compare_bytes(i64({big + 1}), i64({big}), DType::i64, exact).ok());
  EXPECT_TRUE(compare_bytes(i64({big + 1}), i64({big + 1}), DType::i64, exact).ok());
  // An integer output may opt into a tolerance.
  EXPECT_TRUE(compare_bytes(i64({101}), i64({100}), DType::i64, Comparison{CompareMode::tolerance, {1, 0}}).ok());
  EXPECT_FALSE(compare_bytes(i64({102}), i64({100}), DType::i64, Comparison{CompareMode::tolerance, {1, 0}}).ok());
}

TEST(Compare, PerOutputComparisonReplacesTheProblemsTolerance) {
  Comparison own{CompareMode::tolerance, {1e-6, 0}};
  EXPECT_TRUE(compare_bytes(f32({0.005f}), f32({0.0f}), DType::fp32, Tolerance{0.01, 0.01}).ok());
  EXPECT_FALSE(compare_bytes(f32({0.005f}), f32({0.0f}), DType::fp32, own).ok());
  EXPECT_FALSE(compare_to_values(f32({0.005f}), DType::fp32, {0.0}, own).ok());
  Comparison exact{CompareMode::exact, {0, 0}};
  EXPECT_FALSE(compare_bytes(f32({3.0f}), f32({3.0000002f}), DType::fp32, exact).ok());
  EXPECT_TRUE(compare_bytes(f32({-0.0f, 3.0f}), f32({0.0f, 3.0f}), DType::fp32, exact).ok());
  // The timed-call sample check's element rule.
  EXPECT_TRUE(element_ok(1.0, 1.0, exact));
  EXPECT_FALSE(element_ok(2.0, 1.0, exact));
  EXPECT_FALSE(element_ok(1.0005, 1.0, own));
  EXPECT_TRUE(element_ok(1.0005, 1.0, Comparison{CompareMode::tolerance, {1e-3, 0}}));
  EXPECT_TRUE(element_ok(NAN, NAN, exact));
  EXPECT_FALSE(element_ok(NAN, 1.0, Comparison{CompareMode::tolerance, {1e9, 0}}));
  EXPECT_FALSE(element_ok(INFINITY, -INFINITY, own));
}

TEST(Compare, HeldOutCallsAddANormWiseBoundForRoundingNoise) {
  // 1000 values of magnitude about 1: rounding noise of 2^-9 relative on every element, and one
  // near-cancelling element (expected 1e-4) that is off by 0.03, which the tolerance alone rejects.
  std::vector<float> want(1000), noisy(1000), coarse(1000);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = 1.0f + 0.001f * static_cast<float>(i % 97) * (i % 2 ? 1.0f : -1.0f);
    noisy[i] = want[i] * (1.0f + (i % 3 == 0 ? 0x1p-9f : -0x1p-9f));
    coarse[i] = std::round(want[i] * 16.0f) / 16.0f;  // moved in 4 fractional bits
  }
  want[10] = 1e-4f;
  noisy[10] = 0.03f;
  coarse[10] = 0.03f;
  Comparison c{CompareMode::tolerance, {1e-2, 1e-2}};
  c.heldout_rtol = 0x1p-7;
  EXPECT_FALSE(compare_bytes(f32(noisy), f32(want), DType::fp32, c).ok());  // not a held-out call
  auto s = compare_bytes(f32(noisy), f32(want), DType::fp32, for_call(c, true));
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.soft, 1u);
  EXPECT_LT(s.rel_l2, 0x1p-7);
  EXPECT_TRUE(to_json(s, {1000}).contains("heldout"));
  // Data moved in fewer bits: its L2 error is above the bound, and the soft element counts.
  auto q = compare_bytes(f32(coarse), f32(want), DType::fp32, for_call(c, true));
  EXPECT_FALSE(q.ok());
  EXPECT_TRUE(q.norm_failed);
  EXPECT_NE(describe_mismatch(q, {1000}).find("relative L2 error"), std::string::npos) << describe_mismatch(q, {1000});
  // A gross error is wrong whatever the norm: 1.0 away where rms(expected) is 1.
  auto g = noisy;
  g[500] += 1.0f;
  EXPECT_FALSE(compare_bytes(f32(g), f32(want), DType::fp32, for_call(c, true)).ok());
  // Exact outputs stay exact in held-out calls.
  Comparison e{CompareMode::exact, {0, 0}};
  e.heldout_rtol = 0x1p-7;
  EXPECT_EQ(for_call(e, true).norm_rtol, 0.0);
  EXPECT_FALSE(compare_bytes(f32({1.0f, 2.0f}), f32({1.0f, 2.0001f}), DType::fp32, for_call(e, true)).ok());
  // Unwritten or non-finite elements are never soft.
  auto p = noisy;
  p[3] = NAN;
  EXPECT_FALSE(compare_bytes(f32(p), f32(want), DType::fp32, for_call(c, true)).ok());
}

TEST(Sweep, LegendNamesTheLinkRateAndWhereItCameFrom) {
  EXPECT_EQ(link_legend({{"link_gbps", 450.0}, {"source", "datasheet"}}),
            "%link = busbw / 450 GB/s, the datasheet link rate (`pkb calibrate` measures this machine's)");
  EXPECT_EQ(link_legend({{"link_gbps", 368.46}, {"source", "calibrated"}}), "%link = busbw / 368 GB/s, the calibrated link rate");
  EXPECT_EQ(link_legend(nlohmann::json()), "%link = busbw / the link rate");  // a record without a roofline
}

TEST(Sweep, SizesFollowBeginEndFactor) {
  EXPECT_EQ(sweep_sizes(8 << 10, 1 << 20, 4), (std::vector<uint64_t>{8 << 10, 32 << 10, 128 << 10, 512 << 10}));
  EXPECT_EQ(sweep_sizes(1024, 1024, 2), (std::vector<uint64_t>{1024}));
  EXPECT_EQ(sweep_sizes(8 << 10, 1ull << 30, 2).size(), 18u);
  EXPECT_THROW(sweep_sizes(0, 10, 2), Error);
  EXPECT_THROW(sweep_sizes(10, 100, 1.0), Error);
}

}  // namespace
}  // namespace pkb
