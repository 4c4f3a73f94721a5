// The driver's checks of ragged outputs (a spec's `count`): only the counted rows are fingerprinted,
// counted as written, compared with the baseline and the oracle; poison past the count passes, a
// count or a counted value off by one fails.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/digest.hpp"
#include "eval/internal.hpp"

namespace pkb {
namespace {

constexpr int kRows = 4, kCols = 2;
const float kPoison = [] {
  uint32_t bits = 0x7fc0beefu;  // a NaN, as the worker poisons floating outputs
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}();

/// One rank: `rows`, fp32 [4, 2] counted by `n` (int32 [1]).
Instance ragged_instance() {
  Instance inst;
  inst.world = 1;
  RankPlan rp;
  TensorPlan rows{"rows", DType::fp32, {kRows, kCols}};
  rows.compare = default_comparison(DType::fp32, Tolerance{0, 0});
  rows.count_of = 1;
  TensorPlan n{"n", DType::i32, {1}};
  n.compare = default_comparison(DType::i32, Tolerance{});
  rp.outputs = {rows, n};
  inst.ranks.push_back(rp);
  return inst;
}

std::string bytes_of(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

std::string hex(const std::string& b) {
  char h[17];
  std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(digest_bytes(b.data(), b.size())));
  return h;
}

/// A side's one trial: `count` and every row's values, rows past `fingerprinted` poisoned; the worker's
/// fingerprints cover the first `fingerprinted` rows (the counted ones, as its kernels read them).
StepResult side(int32_t count, std::vector<float> values, int fingerprinted = -1) {
  if (fingerprinted < 0) fingerprinted = std::max(0, std::min<int>(count, kRows));
  std::string rows = bytes_of(values.data(), values.size() * sizeof(float));
  std::string n = bytes_of(&count, sizeof count);
  RankTrial rt;
  rt.outputs = {rows, n};
  std::string counted = rows.substr(0, static_cast<size_t>(fingerprinted) * kCols * sizeof(float));
  rt.meta = {{"outputs",
              {{{"digest_return", hex(counted)}, {"digest_after", hex(counted)}, {"poison", "7fc0beef"}},
               {{"digest_return", hex(n)}, {"digest_after", hex(n)}, {"poison", "12345678"}}}},
             {"inputs", nlohmann::json::array()}};
  StepResult sr;
  sr.trials = {{rt}};
  return sr;
}

std::vector<float> three_rows_then(float fill) { return {1, 2, 3, 4, 5, 6, fill, fill}; }

TEST(RaggedTrials, PoisonAndAnythingPastTheCountPass) {
  Instance inst = ragged_instance();
  StepResult base = side(3, three_rows_then(kPoison));
  for (float fill : {kPoison, 0.0f, std::numeric_limits<float>::infinity(), 42.0f}) {
    StepResult cand = side(3, three_rows_then(fill));
    EvalRecord rec;
    detail::check_sanity(inst, cand, rec);
    detail::check_trials(inst, base, cand, rec);
    EXPECT_TRUE(rec.checks.empty()) << fill << ": " << rec.checks[0].what << ": " << rec.checks[0].message;
    EXPECT_TRUE(rec.bitwise_identical.value_or(false)) << "the counted rows are the same bytes";
  }
}

TEST(RaggedTrials, ACountOffByOneFails) {
  Instance inst = ragged_instance();
  StepResult base = side(3, three_rows_then(kPoison));
  std::vector<float> four = three_rows_then(kPoison);
  four[6] = 7, four[7] = 8;  // a fourth row written, and counted
  EvalRecord rec;
  StepResult cand = side(4, four);
  detail::check_sanity(inst, cand, rec);
  EXPECT_TRUE(rec.checks.empty()) << "its own output is consistent";
  detail::check_trials(inst, base, cand, rec);
  auto f = rec.checks;
  ASSERT_EQ(f.size(), 2u);  // the count, exactly; and the rows, which say both counts
  EXPECT_NE(f[0].what.find("output 'rows' vs baseline"), std::string::npos) << f[0].what;
  EXPECT_NE(f[0].message.find("holds 4 counted rows, the baseline's 3"), std::string::npos) << f[0].message;
  EXPECT_NE(f[1].what.find("output 'n' vs baseline"), std::string::npos) << f[1].what;
  EXPECT_EQ(f[1].status, Status::mismatch);
}

TEST(RaggedTrials, ACountedRowLeftUnwrittenOrWrongFails) {
  Instance inst = ragged_instance();
  StepResult base = side(3, three_rows_then(kPoison));
  std::vector<float> unwritten = three_rows_then(kPoison);
  unwritten[5] = kPoison;  // the third row's second element never written
  EvalRecord sanity;
  detail::check_sanity(inst, side(3, unwritten), sanity);
  auto f = sanity.checks;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("1 of 6 counted elements were never written"), std::string::npos) << f[0].message;

  std::vector<float> wrong = three_rows_then(kPoison);
  wrong[4] = 5.5f;
  EvalRecord rec;
  detail::check_trials(inst, base, side(3, wrong), rec);
  ASSERT_EQ(rec.checks.size(), 1u);
  EXPECT_NE(rec.checks[0].what.find("output 'rows' vs baseline"), std::string::npos);
  EXPECT_FALSE(rec.bitwise_identical.value_or(true));
}

// A count beyond the capacity is clamped (every row checked) and still wrong by itself; a fingerprint
// over more than the counted rows is not what the worker's kernels compute, so the transfer check sees it.
TEST(RaggedTrials, ACountPastTheCapacityIsClampedAndTheFingerprintCoversTheCountedRowsOnly) {
  Instance inst = ragged_instance();
  std::vector<float> full{1, 2, 3, 4, 5, 6, 7, 8};
  EvalRecord rec;
  detail::check_sanity(inst, side(1000, full), rec);
  EXPECT_TRUE(rec.checks.empty()) << rec.checks[0].message;
  EvalRecord transfer;
  detail::check_sanity(inst, side(3, three_rows_then(kPoison), 4), transfer);
  ASSERT_FALSE(transfer.checks.empty());
  EXPECT_NE(transfer.checks[0].what.find("transfer"), std::string::npos) << transfer.checks[0].what;
}

/// One timed call, fully checked, of the ragged instance: the samples (2 of `rows`: the worker reads
/// zero past the count) and both outputs whole.
StepResult timed_side(int32_t count, const std::vector<float>& values, const std::vector<float>& samples) {
  std::string rows = bytes_of(values.data(), values.size() * sizeof(float)), n = bytes_of(&count, sizeof count);
  std::string counted = rows.substr(0, static_cast<size_t>(std::max(0, std::min(count, kRows))) * kCols * sizeof(float));
  StepResult sr;
  sr.calls.resize(1);
  sr.calls[0].push_back({0.01, {hex(counted), hex(n)}, {0, 0}, {0, 0}, 0.0, 1.0});
  nlohmann::json body{{"iters", 1},
                      {"outputs",
                       {{{"digests", {hex(counted)}}, {"unwritten", {0}}, {"nonfinite", {0}}, {"samples", 2}},
                        {{"digests", {hex(n)}}, {"unwritten", {0}}, {"nonfinite", {0}}, {"samples", 1}}}},
                      {"inputs", nlohmann::json::array()}};
  std::string blob = bytes_of(samples.data(), samples.size() * sizeof(float)) + n + rows + n;
  sr.timing.push_back({body, blob});
  sr.full_calls = {0};
  return sr;
}

TEST(RaggedTimedCalls, AFullyCheckedCallComparesTheCountedRowsOnly) {
  Instance inst = ragged_instance();
  StepResult base = timed_side(3, three_rows_then(kPoison), {1, 0});
  EvalRecord ok;
  detail::check_timed_calls(inst, base, timed_side(3, three_rows_then(-1.0f), {1, 0}), ok);
  EXPECT_TRUE(ok.checks.empty()) << ok.checks[0].what << ": " << ok.checks[0].message;

  std::vector<float> wrong = three_rows_then(kPoison);
  wrong[3] = 40;  // a counted element no sample looked at
  EvalRecord bad;
  detail::check_timed_calls(inst, base, timed_side(3, wrong, {1, 0}), bad);
  auto f = bad.checks;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].what.find("timed call 0 rank 0 output 'rows' (every element) vs baseline"), std::string::npos) << f[0].what;

  std::vector<float> four = three_rows_then(kPoison);
  four[6] = 7, four[7] = 8;
  EvalRecord more;
  detail::check_timed_calls(inst, base, timed_side(4, four, {1, 0}), more);
  f = more.checks;
  ASSERT_GE(f.size(), 2u);  // the count's sample and whole value, and the rows' counts
  bool rows_said = false;
  for (auto& c : f) rows_said |= c.message.find("holds 4 counted rows, the baseline's 3") != std::string::npos;
  EXPECT_TRUE(rows_said);
}

// The oracle's own count says which rows it computed: the baseline's rows past it are not compared.
TEST(RaggedOracle, TheOraclesCountDecidesWhichRowsAreCompared) {
  Instance inst = ragged_instance();
  Spec spec;
  spec.stem = "test_ragged";
  inst.spec = &spec;
  OracleFn three = [](OracleIO& io) {
    auto& out = io.outputs[0];
    for (int i = 0; i < 6; ++i) out[0].values[i] = i + 1;
    out[0].values[6] = out[0].values[7] = -99;  // past its count: ignored
    out[1].values[0] = 3;
  };
  EvalRecord ok;
  detail::check_oracle_with(three, inst, 1, side(3, three_rows_then(kPoison)), ok);
  EXPECT_TRUE(ok.checks.empty()) << ok.checks[0].what << ": " << ok.checks[0].message;

  EvalRecord bad;
  detail::check_oracle_with(three, inst, 1, side(2, three_rows_then(kPoison)), bad);
  auto f = bad.checks;
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NE(f[0].message.find("holds 2 counted rows, the oracle 3"), std::string::npos) << f[0].message;
  EXPECT_NE(f[1].what.find("output 'n' vs oracle"), std::string::npos) << f[1].what;
}

}  // namespace
}  // namespace pkb
