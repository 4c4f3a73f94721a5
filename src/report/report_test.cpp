#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "report/console.hpp"
#include "report/record.hpp"
#include "report/safetensors.hpp"

namespace pkb {
namespace {

EvalRecord sample_record() {
  EvalRecord r;
  r.kind = "eval";
  r.timestamp = "2026-11-29T00:00:00Z";
  r.problem_id = 1;
  r.problem_stem = "1_allreduce";
  r.problem_name = "allreduce";
  r.spec_hash = std::string(64, 'a');
  r.baseline = {"baseline", "problems/1_allreduce/reference.cu", std::string(64, 'b'), true, 0, 2.0, true};
  r.candidate = {"candidate", "x.cu", std::string(64, 'c'), false, 12.5, 2.5, true};
  r.world = 4;
  r.dtype = "bf16";
  r.size_name = "default";
  r.params = {{"M", 1024}, {"N", 1024}, {"W", 4}};
  r.trials = 5;
  r.atol = r.rtol = 0.01;
  r.seed = "00000000000000ff";
  r.baseline_timing.measured = r.candidate_timing.measured = true;
  r.baseline_timing.us.median = 30;
  r.candidate_timing.us.median = 10;
  r.baseline_timing.iters = r.candidate_timing.iters = 100;
  r.speedup = 3.0;
  r.bitwise_identical = true;
  r.checks_passed = 42;
  return r;
}

TEST(Record, JsonSchemaHasEveryField) {
  auto j = to_json(sample_record());
  for (const char* k :
       {"schema_version", "harness_version", "kind", "timestamp", "argv", "problem", "baseline", "candidate", "config", "system",
        "status", "message", "failed_checks", "timing", "speedup", "bitwise_identical", "warnings", "wall_s"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["problem"]["stem"], "1_allreduce");
  EXPECT_EQ(j["config"]["world"], 4);
  EXPECT_DOUBLE_EQ(j["timing"]["candidate"]["median_us"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["speedup"].get<double>(), 3.0);
}

TEST(Record, OversubscribedRunsSaySoAndClaimNoSpeedup) {
  EvalRecord r = sample_record();
  EXPECT_FALSE(to_json(r)["config"]["oversubscribed"].get<bool>());
  r.oversubscribed = true;
  r.ranks_per_gpu = 4;
  r.gpus_used = 1;
  auto j = to_json(r);
  EXPECT_TRUE(j["config"]["oversubscribed"].get<bool>());
  EXPECT_EQ(j["config"]["ranks_per_gpu"], 4);
  EXPECT_EQ(j["config"]["gpus"], 1);
  EXPECT_EQ(j["status"], "ok");  // the status is unaffected
  std::string s = format_summary(r, false);
  EXPECT_NE(s.find("4 ranks on 1 GPU(s) (--oversubscribe)"), std::string::npos) << s;
  EXPECT_NE(s.find("3.000x — not a measurement"), std::string::npos) << s;
}

TEST(Record, FailuresCarryTheirChecksAndStatus) {
  EvalRecord r = sample_record();
  r.add_check(true, "fine");
  r.add_check(false, "trial 0 rank 1 output 'out' vs baseline", "3 of 16 elements wrong", {{"mismatches", 3}});
  r.status = Status::mismatch;
  r.speedup.reset();
  auto j = to_json(r);
  EXPECT_EQ(j["status"], "mismatch");
  EXPECT_EQ(j["passed_check_count"], 43);
  ASSERT_EQ(j["failed_checks"].size(), 1u);
  EXPECT_EQ(j["failed_checks"][0]["status"], "mismatch");
  EXPECT_TRUE(j["speedup"].is_null());
}

TEST(Console, SummaryShowsTheEssentials) {
  std::string s = format_summary(sample_record(), false);
  for (const char* want : {"pkb eval 1_allreduce", "W=4", "bf16", "status", "ok", "baseline", "candidate", "speedup", "3.000x"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EvalRecord r = sample_record();
  r.status = Status::crash;
  r.message = "rank 1 was killed by signal 6";
  r.failed_rank = 1;
  r.failed_phase = "trial 0";
  r.log_tail = "line a\nline b\n";
  s = format_summary(r, false);
  EXPECT_NE(s.find("crash — rank 1 was killed"), std::string::npos) << s;
  EXPECT_NE(s.find("| line b"), std::string::npos) << s;
}

// Where each job's time went: in the record per side, in the order the phases ran; on the
// terminal the phases of 0.1 s or more.
TEST(Console, PhaseTimesPerSide) {
  EvalRecord r = sample_record();
  r.baseline.phase_s = {{"start", 0.02}, {"setup", 2.14}, {"trials", 0.81}, {"timing", 0.5}, {"teardown", 0.04}};
  r.candidate.phase_s = {{"start", 0.03}, {"setup", 2.2}, {"trials", 0.9}};
  auto j = to_json(r);
  ASSERT_EQ(j["baseline"]["phases"].size(), 5u);
  EXPECT_EQ(j["baseline"]["phases"][1]["phase"], "setup");
  EXPECT_DOUBLE_EQ(j["baseline"]["phases"][1]["s"].get<double>(), 2.14);
  std::string s = format_summary(r, false);
  EXPECT_NE(s.find("  phases     baseline: setup 2.1, trials 0.8, timing 0.5 s\n"
                   "             candidate: setup 2.2, trials 0.9 s\n"),
            std::string::npos)
      << s;
  EXPECT_FALSE(to_json(sample_record())["baseline"].contains("phases"));  // a failed job has none
  EXPECT_EQ(format_summary(sample_record(), false).find("phases"), std::string::npos);
}

TEST(Safetensors, RoundTripAndValidation) {
  auto dir = std::filesystem::temp_directory_path() / ("pkb_st_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string a(2 * 3 * 2, '\x01'), b(4 * 8, '\x02');
  write_safetensors(dir / "x.safetensors", {{"output.out", DType::bf16, {2, 3}, a}, {"input.x", DType::fp64, {4}, b}},
                    {{"problem", "1_allreduce"}});
  auto f = read_safetensors(dir / "x.safetensors");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "output.out");
  EXPECT_EQ(f.find("input.x")->bytes, b);
  EXPECT_EQ(f.find("input.x")->dtype, DType::fp64);
  EXPECT_EQ(f.metadata.at("problem"), "1_allreduce");
  std::ofstream(dir / "bad.safetensors") << "garbage!";
  EXPECT_THROW(read_safetensors(dir / "bad.safetensors"), Error);
  EXPECT_THROW(write_safetensors(dir / "y.safetensors", {{"t", DType::fp32, {3}, "12"}}), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pkb
