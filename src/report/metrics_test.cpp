// Metric definitions against hand-computed values, the tolerant record reader, duplicate handling
// and the aggregation into runs and cells.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "report/leaderboard.hpp"
#include "report/metrics.hpp"
#include "report/record_mac.hpp"
#include "report/report.hpp"
#include "report/report_fixtures.hpp"
#include "report/tables.hpp"

namespace pkb {
namespace {

using testing::Rec;

TEST(PassAtK, MatchesTheBinomialFormula) {
  // n=5, c=2: 1 - C(3,k)/C(5,k)
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 1), 1.0 - 3.0 / 5.0);  // 0.4
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 2), 1.0 - 3.0 / 10.0);  // 0.7
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 3), 1.0 - 1.0 / 10.0);  // 0.9
  EXPECT_DOUBLE_EQ(pass_at_k(5, 2, 4), 1.0);  // only 3 wrong: any 4 hold a correct one
  EXPECT_NEAR(pass_at_k(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);
  EXPECT_DOUBLE_EQ(pass_at_k(5, 0, 3), 0.0);
  EXPECT_DOUBLE_EQ(pass_at_k(5, 5, 1), 1.0);
  EXPECT_DOUBLE_EQ(pass_at_k(1, 1, 1), 1.0);
  // Large n without overflow: C(199,100)/C(200,100) = 100/200.
  EXPECT_NEAR(pass_at_k(200, 1, 100), 0.5, 1e-12);
}

TEST(PassAtK, RejectsImpossibleArguments) {
  EXPECT_THROW(pass_at_k(5, 2, 6), Error);
  EXPECT_THROW(pass_at_k(5, 6, 1), Error);
  EXPECT_THROW(pass_at_k(0, 0, 1), Error);
  EXPECT_THROW(pass_at_k(5, 2, 0), Error);
}

TEST(FastP, CountsBestCorrectSpeedupsStrictlyAboveP) {
  std::vector<std::optional<double>> best{2.5, 1.2, 0.8, std::nullopt, std::nullopt};
  EXPECT_DOUBLE_EQ(fast_p(best, 0.0), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(fast_p(best, 1.0), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(fast_p(best, 1.5), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(fast_p(best, 2.0), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(fast_p(best, 2.5), 0.0);  // strictly greater
  EXPECT_DOUBLE_EQ(fast_p({}, 1.0), 0.0);
}

TEST(GeometricMean, OfPositiveValues) {
  EXPECT_DOUBLE_EQ(*geometric_mean({1.0, 4.0}), 2.0);
  EXPECT_NEAR(*geometric_mean({0.5, 2.0}), 1.0, 1e-12);
  EXPECT_NEAR(*geometric_mean({2.0, 8.0, 4.0}), 4.0, 1e-12);
  EXPECT_FALSE(geometric_mean({}).has_value());
  EXPECT_THROW(geometric_mean({1.0, 0.0}), Error);
}

TEST(PassKValues, StandardKsUpToTheSmallestSampleCount) {
  EXPECT_EQ(pass_k_values(1), (std::vector<int>{1}));
  EXPECT_EQ(pass_k_values(3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(pass_k_values(4), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(pass_k_values(10), (std::vector<int>{1, 2, 3, 5, 10}));
  EXPECT_EQ(pass_k_values(12), (std::vector<int>{1, 2, 3, 5, 10, 12}));
}

TEST(Results, ReaderToleratesOldRecordsAndFallsBackToTheDirectoryName) {
  Rec old;  // no label, sample or roofline keys
  old.candidate = "solutions/examples/1_allreduce_oneshot.cu";
  old.speedup = 0.96;
  ResultRow r = testing::row(old);
  EXPECT_EQ(r.label, "");
  EXPECT_EQ(r.run, "examples");
  EXPECT_EQ(r.sample, 0);
  EXPECT_FALSE(r.roofline_pct);
  EXPECT_NEAR(*r.candidate_us, 30.0 / 0.96, 1e-9);
  EXPECT_EQ(run_label_fallback("problems/3_broadcast/reference.cu"), "reference");
  EXPECT_EQ(run_label_fallback("x.cu"), "(unlabelled)");
}

TEST(Results, RooflinePercentPrefersTheFloorOverPct) {
  EXPECT_DOUBLE_EQ(*roofline_percent({{"floor_us", 5.0}, {"pct", 0.5}}, 10.0), 50.0);
  EXPECT_DOUBLE_EQ(*roofline_percent({{"floor_us", 5.0}, {"measured_us", 20.0}, {"pct", 25.0}}, 10.0), 25.0);
  EXPECT_DOUBLE_EQ(*roofline_percent({{"pct", 42.0}}, 10.0), 42.0);
  EXPECT_DOUBLE_EQ(*roofline_percent({{"fraction", 0.25}}, std::nullopt), 25.0);
  EXPECT_FALSE(roofline_percent(nullptr, 10.0));
  EXPECT_FALSE(roofline_percent(nlohmann::json::object(), 10.0));
}

// A file cut short by a crash, or a stray line, costs only that line (named by file:line) unless
// the caller asks for strictness.
TEST(Results, BadLinesAreSkippedAndNamedUnlessStrict) {
  auto dir = std::filesystem::temp_directory_path() / ("pkb_results_skip_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json no_status = testing::record_json(Rec{});
  no_status.erase("status");
  std::ofstream(dir / "cut.jsonl") << testing::record_json(Rec{}).dump() << "\n{\"problem\": {\"id\": 1, \"st\n"
                                   << no_status.dump() << "\n"
                                   << testing::record_json(Rec{}).dump() << "\n";
  EXPECT_THROW(read_results(dir / "cut.jsonl"), Error);
  std::vector<std::string> skipped;
  auto rows = read_results(dir / "cut.jsonl", nullptr, &skipped);
  EXPECT_EQ(rows.size(), 2u);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("cut.jsonl:2"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("cut.jsonl:3"), std::string::npos) << skipped[1];
  auto report = load_report({dir / "cut.jsonl"}, false);
  EXPECT_EQ(report.context.skipped.size(), 2u);
  EXPECT_THROW(load_report({dir / "cut.jsonl"}, false, true), Error);
  std::filesystem::remove_all(dir);
}

TEST(Results, BadRecordsNameFileAndLine) {
  auto dir = std::filesystem::temp_directory_path() / ("pkb_results_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "bad.jsonl") << testing::record_json(Rec{}).dump() << "\n\n{not json\n";
  try {
    read_results(dir / "bad.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::parse_error);
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:3"), std::string::npos) << e.what();
  }
  nlohmann::json j = testing::record_json(Rec{});
  j["status"] = "exploded";
  EXPECT_THROW(row_from_json(j, "x:1"), Error);
  j.erase("problem");
  EXPECT_THROW(row_from_json(j, "x:1"), Error);
  EXPECT_THROW(read_results(dir / "missing.jsonl"), Error);
  std::filesystem::remove_all(dir);
}

TEST(Leaderboard, DuplicatesLastWinsAndRunRecordsAreLeftOut) {
  LoadedReport rep = make_report(testing::two_run_rows(), {"a.jsonl"});
  EXPECT_EQ(rep.context.records_read, 15u);
  EXPECT_EQ(rep.context.not_eval, 1u);
  ASSERT_EQ(rep.context.replaced.size(), 1u);
  EXPECT_NE(rep.context.replaced[0].find("model-a / 1_allreduce / sample 0: a.jsonl:1 replaced by a.jsonl:2"), std::string::npos)
      << rep.context.replaced[0];
  EXPECT_EQ(rep.rows.size(), 13u);
}

TEST(Leaderboard, MetricsOfTheHandWorkedExample) {
  Leaderboard b = make_report(testing::two_run_rows(), {"a.jsonl"}).board;
  ASSERT_EQ(b.runs.size(), 2u);
  const RunSummary& a = b.runs[0];
  EXPECT_EQ(a.name, "model-a");
  EXPECT_EQ(a.attempted, 2);
  EXPECT_EQ(a.correct, 2);
  EXPECT_EQ(a.min_samples, 5);  // the harness error is not an attempt
  // 1_allreduce: n=5 c=2 (one faster); 2_allgather: n=5 c=1 (faster).
  ASSERT_EQ(a.pass_at.size(), 4u);  // k = 1, 2, 3, 5
  EXPECT_NEAR(a.pass_at[0].value, (0.4 + 0.2) / 2, 1e-12);
  EXPECT_NEAR(a.pass_at[1].value, (0.7 + 0.4) / 2, 1e-12);
  EXPECT_NEAR(a.pass_at[2].value, (0.9 + 0.6) / 2, 1e-12);
  EXPECT_EQ(a.pass_at[3].k, 5);
  EXPECT_NEAR(a.pass_at[3].value, 1.0, 1e-12);
  EXPECT_NEAR(a.fast1_at[0].value, (0.2 + 0.2) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(a.fast_at(0), 1.0);
  EXPECT_DOUBLE_EQ(a.fast_at(1), 1.0);  // best samples 1.5 and 3.0
  EXPECT_DOUBLE_EQ(a.fast_at(1.5), 0.5);  // 1.5 is not > 1.5
  EXPECT_DOUBLE_EQ(a.fast_at(2), 0.5);
  EXPECT_NEAR(*a.geomean_speedup, std::sqrt(1.5 * 3.0), 1e-12);
  EXPECT_NEAR(*a.median_roofline_pct, (20.0 + 50.0) / 2, 1e-12);
  EXPECT_EQ(a.failures.at(Status::mismatch), 2);
  EXPECT_EQ(a.failures.at(Status::crash), 4);
  EXPECT_EQ(a.failures.at(Status::compile_error), 1);
  EXPECT_EQ(a.failures.at(Status::harness_error), 1);
  EXPECT_EQ(a.cells.at("2_allgather").statuses.at(Status::harness_error), 1);

  const RunSummary& ref = b.runs[1];
  EXPECT_EQ(ref.name, "reference");
  EXPECT_EQ(ref.pass_at.size(), 1u);
  EXPECT_DOUBLE_EQ(ref.pass_at[0].value, 1.0);
  EXPECT_DOUBLE_EQ(ref.fast_at(0), 1.0);
  EXPECT_DOUBLE_EQ(ref.fast_at(1), 0.0);  // 1.0 and 0.99: not faster
  EXPECT_FALSE(ref.median_roofline_pct);
  EXPECT_EQ(b.k_values, (std::vector<int>{1, 2, 3, 5}));
  ASSERT_EQ(b.problems.size(), 2u);
  EXPECT_EQ(b.problems[0].stem, "1_allreduce");
}

TEST(Leaderboard, CellShowsOkOrTheCommonestFailure) {
  Cell c;
  c.statuses = {{Status::mismatch, 1}, {Status::crash, 3}, {Status::harness_error, 5}};
  EXPECT_EQ(c.shown(), Status::crash);
  c.correct = 1;
  EXPECT_EQ(c.shown(), Status::ok);
  Cell h;
  h.statuses = {{Status::harness_error, 2}};
  EXPECT_EQ(h.shown(), Status::harness_error);
}

// Records of ranks sharing GPUs (--oversubscribe) are verdicts: they count for pass@k, but their
// speedups and rooflines are not measurements and stay out of every timing figure; unsupported
// (symmetric memory refused in that mode) is not an attempt at all.
TEST(Leaderboard, OversubscribedRecordsCountForPassAtKButNotForSpeedups) {
  auto rec = [](std::string stem, int id, int sample, std::string status, std::optional<double> s, bool shared) {
    Rec r;
    r.label = "m";
    r.stem = stem;
    r.id = id;
    r.sample = sample;
    r.status = status;
    r.speedup = s;
    r.oversubscribed = shared;
    r.roofline = s ? nlohmann::json{{"pct", 40.0}} : nlohmann::json(nullptr);
    return row(r);
  };
  std::vector<ResultRow> rows{rec("1_allreduce", 1, 0, "ok", 2.0, false),  // a real measurement
                              rec("1_allreduce", 1, 1, "ok", 9.0, true),  // shared GPU: not a speedup
                              rec("2_allgather", 2, 0, "ok", 5.0, true),  // only shared: no fast_p entry
                              rec("3_broadcast", 3, 0, "mismatch", std::nullopt, true),
                              rec("4_reduce", 4, 0, "unsupported", std::nullopt, true)};
  EXPECT_TRUE(rows[1].oversubscribed);
  auto board = build_leaderboard(prepare_rows(rows).rows);
  ASSERT_EQ(board.runs.size(), 1u);
  const RunSummary& m = board.runs[0];
  EXPECT_EQ(m.oversubscribed, 4);  // every record but the first
  EXPECT_EQ(m.attempted, 3);  // 4_reduce's unsupported record is no attempt
  EXPECT_EQ(m.correct, 2);
  EXPECT_EQ(m.cells.at("4_reduce").samples, 0);
  EXPECT_EQ(m.cells.at("1_allreduce").samples, 2);
  EXPECT_DOUBLE_EQ(*m.cells.at("1_allreduce").best_speedup, 2.0);  // 9.0 was measured on a shared GPU
  EXPECT_FALSE(m.cells.at("2_allgather").best_speedup);
  EXPECT_EQ(m.timed_correct, 1);
  EXPECT_DOUBLE_EQ(*m.geomean_speedup, 2.0);
  EXPECT_EQ(m.roofline_measured, 1);
  // fast_p is over the problems with a timing that counts: only 1_allreduce, and it is fast.
  EXPECT_EQ(m.best_speedups.size(), 1u);
  EXPECT_DOUBLE_EQ(m.fast_at(1.0), 1.0);
  std::string note = summary_table(board, NumberStyle::display).note;
  EXPECT_NE(note.find("4 record(s) ran with ranks sharing GPUs"), std::string::npos) << note;
  note = failures_table(board).note;
  EXPECT_NE(note.find("unsupported"), std::string::npos) << note;
}

TEST(Leaderboard, OneLabelAtTwoConfigurationsIsTwoRuns) {
  Rec a;
  a.label = "m";
  a.speedup = 1.2;
  Rec b = a;
  b.world = 2;
  Leaderboard board = make_report({testing::row(a), testing::row(b)}, {"x"}).board;
  ASSERT_EQ(board.runs.size(), 2u);
  EXPECT_EQ(board.runs[0].name, "m (W=4 bf16 default)");
  EXPECT_EQ(board.runs[1].name, "m (W=2 bf16 default)");
}

// The driver signs every record it writes; a line appended by anybody else (a candidate that found
// the results file) or a record altered afterwards is rejected by name, and the rest still count.
TEST(RecordTrust, ForgedAndAlteredLinesAreRejectedWithTheirLine) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("pkb_mac_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::setenv("PKB_CACHE_DIR", dir.string().c_str(), 1);
  Rec a;
  a.label = "m";
  a.speedup = 1.2;
  Rec b = a;
  b.stem = "2_allgather";
  b.id = 2;
  fs::path file = dir / "r.jsonl";
  append_line(file, signed_record(testing::record_json(a)).dump());
  append_line(file, signed_record(testing::record_json(b)).dump());
  Rec forged = a;
  forged.stem = "3_broadcast";
  forged.id = 3;
  forged.speedup = 50.0;
  append_line(file, testing::record_json(forged).dump());  // line 3: no MAC
  auto altered = signed_record(testing::record_json(b));
  altered["speedup"] = 40.0;  // line 4: MAC of other content
  append_line(file, altered.dump());
  ASSERT_TRUE(record_key(false).has_value());
  EXPECT_EQ(fs::status(dir / "record.key").permissions() & fs::perms::others_read, fs::perms::none);

  LoadedReport r = load_report({file});
  ASSERT_EQ(r.context.rejected.size(), 2u);
  EXPECT_NE(r.context.rejected[0].find("r.jsonl:3: no MAC in a file of signed records"), std::string::npos)
      << r.context.rejected[0];
  EXPECT_NE(r.context.rejected[1].find("r.jsonl:4: its MAC does not verify"), std::string::npos) << r.context.rejected[1];
  ASSERT_EQ(r.board.runs.size(), 1u);
  EXPECT_EQ(r.board.runs[0].attempted, 2);  // 1_allreduce and 2_allgather, not the forgery
  EXPECT_DOUBLE_EQ(*r.board.runs[0].geomean_speedup, 1.2);
  // --no-verify keeps everything (records from another machine's pkb).
  EXPECT_EQ(load_report({file}, false).board.runs[0].attempted, 3);
  // A file with no MAC at all (older pkb) is read as it is, its records counted as unsigned.
  fs::path old = dir / "old.jsonl";
  append_line(old, testing::record_json(a).dump());
  LoadedReport o = load_report({old});
  EXPECT_TRUE(o.context.rejected.empty());
  EXPECT_EQ(o.context.unsigned_kept, 1u);
  ::unsetenv("PKB_CACHE_DIR");
  fs::remove_all(dir);
}

TEST(Leaderboard, ReadsTheRecordedH200Results) {
  auto file = pkb_home() / "docs/results/foundation-x4-2026-11-29.jsonl";
  Leaderboard b = load_report({file}).board;
  ASSERT_EQ(b.runs.size(), 2u);
  EXPECT_EQ(b.runs[0].name, "reference");  // baselines evaluated against themselves
  EXPECT_EQ(b.runs[0].attempted, 8);
  EXPECT_EQ(b.runs[0].correct, 8);
  EXPECT_EQ(b.runs[1].name, "examples");
  EXPECT_EQ(b.runs[1].attempted, 1);
  EXPECT_EQ(b.problems.size(), 8u);
}

}  // namespace
}  // namespace pkb
