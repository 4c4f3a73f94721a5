// `pkb compare` on synthetic artifact directories (agreement within tolerance, a mismatch with its
// first element, missing ranks and tensors, shape and dtype differences, unreadable files, seeds)
// and on two result files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "compare/artifacts.hpp"
#include "compare/results_diff.hpp"
#include "core/error.hpp"
#include "report/report_fixtures.hpp"
#include "report/safetensors.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

NamedTensor f32(const std::string& name, std::vector<float> v, std::vector<long long> shape = {}) {
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  if (shape.empty()) shape = {static_cast<long long>(v.size())};
  return {name, DType::fp32, shape, bytes};
}

NamedTensor i32(const std::string& name, std::vector<int32_t> v) {
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return {name, DType::i32, {static_cast<long long>(v.size())}, bytes};
}

class CompareArtifacts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("pkb_compare_" + std::to_string(getpid()));
    fs::remove_all(root_);
    a_ = root_ / "A";
    b_ = root_ / "B";
    std::map<std::string, std::string> seed_a{{"seed", "00aa"}}, seed_b{{"seed", "00aa"}};
    write_safetensors(a_ / "trial_0/rank_0.safetensors",
                      {f32("input.x", {1, 2, 3, 4}), f32("output.out", {1, 2, 3, 4}), f32("output.aux", {1, 2, 3, 4}, {2, 2}),
                       i32("output.idx", {1, 2})},
                      seed_a);
    write_safetensors(b_ / "trial_0/rank_0.safetensors",
                      {f32("input.x", {1, 2, 3, 4}), f32("output.out", {1, 2.001f, 3, 4}), f32("output.aux", {1, 2, 3, 4}),
                       f32("output.idx", {1, 2}), f32("output.extra", {0})},
                      seed_b);
    write_safetensors(a_ / "trial_0/rank_1.safetensors", {f32("output.out", {10, 20, 30, 40})}, {{"seed", "00aa"}});
    write_safetensors(b_ / "trial_0/rank_1.safetensors", {f32("output.out", {10, 25, 30, 40})}, {{"seed", "00bb"}});
    write_safetensors(a_ / "trial_1/rank_0.safetensors", {f32("output.out", {1})});  // rank missing in B
    fs::create_directories(a_ / "trial_2");
    fs::create_directories(b_ / "trial_2");
    std::ofstream(a_ / "trial_2/rank_0.safetensors") << "garbage!";
    std::ofstream(b_ / "trial_2/rank_0.safetensors") << "garbage!";
  }
  void TearDown() override { fs::remove_all(root_); }

  const TensorFinding* find(const ArtifactComparison& c, const std::string& file, const std::string& tensor) {
    for (auto& f : c.findings)
      if (f.file == file && f.tensor == tensor) return &f;
    return nullptr;
  }

  fs::path root_, a_, b_;
};

// A ragged output (dumped with "count.output.<name>"): each side's counted rows, by its own count.
TEST(CompareRagged, CountedRowsOnlyAndDifferentCountsDiffer) {
  fs::path root = fs::temp_directory_path() / ("pkb_compare_ragged_" + std::to_string(getpid()));
  fs::remove_all(root);
  std::map<std::string, std::string> meta{{"count.output.rows", "output.n"}, {"compare.output.rows", "exact"}};
  auto dump = [&](const std::string& side, const std::string& file, std::vector<float> rows, int32_t n) {
    write_safetensors(root / side / file, {f32("output.rows", rows, {3, 2}), i32("output.n", {n})}, meta);
  };
  dump("A", "same.safetensors", {1, 2, 3, 4, NAN, NAN}, 2);
  dump("B", "same.safetensors", {1, 2, 3, 4, 7, -1}, 2);  // anything past the count
  dump("A", "more.safetensors", {1, 2, 3, 4, NAN, NAN}, 2);
  dump("B", "more.safetensors", {1, 2, 3, 4, 5, 6}, 3);
  dump("A", "wrong.safetensors", {1, 2, 3, 4, NAN, NAN}, 2);
  dump("B", "wrong.safetensors", {1, 2, 3, 5, NAN, NAN}, 2);
  ArtifactComparison c = compare_artifact_dirs(root / "A", root / "B", {0, 0});
  auto kind = [&](const std::string& file, const std::string& tensor) {
    for (auto& f : c.findings)
      if (f.file == file && f.tensor == tensor) return f;
    ADD_FAILURE() << file << " " << tensor << " not compared";
    return TensorFinding{};
  };
  EXPECT_EQ(kind("same.safetensors", "output.rows").kind, FindingKind::agree);
  EXPECT_TRUE(kind("same.safetensors", "output.rows").bitwise_equal);
  EXPECT_EQ(kind("more.safetensors", "output.rows").kind, FindingKind::differ);
  EXPECT_EQ(kind("more.safetensors", "output.rows").detail, "counted rows differ: A 2, B 3");
  EXPECT_EQ(kind("more.safetensors", "output.n").kind, FindingKind::differ);
  EXPECT_EQ(kind("wrong.safetensors", "output.rows").kind, FindingKind::differ);
  EXPECT_NE(format_artifact_comparison(c).find("counted rows differ: A 2, B 3"), std::string::npos);
  fs::remove_all(root);
}

TEST_F(CompareArtifacts, EveryRankTrialAndTensor) {
  ArtifactComparison c = compare_artifact_dirs(a_, b_, {1e-2, 1e-2});
  EXPECT_FALSE(c.all_agree());
  EXPECT_EQ(c.files, 2u);  // trial_0 rank 0 and 1 (trial_2 is unreadable)
  auto* in = find(c, "trial_0/rank_0.safetensors", "input.x");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->kind, FindingKind::agree);
  EXPECT_TRUE(in->bitwise_equal);
  auto* out0 = find(c, "trial_0/rank_0.safetensors", "output.out");
  ASSERT_TRUE(out0);
  EXPECT_EQ(out0->kind, FindingKind::agree);
  EXPECT_FALSE(out0->bitwise_equal);
  EXPECT_NEAR(out0->stats.max_abs, 0.001, 1e-6);
  auto* out1 = find(c, "trial_0/rank_1.safetensors", "output.out");
  ASSERT_TRUE(out1);
  EXPECT_EQ(out1->kind, FindingKind::differ);
  EXPECT_EQ(out1->stats.mismatches, 1u);
  EXPECT_EQ(out1->stats.first_bad, 1);
  EXPECT_DOUBLE_EQ(out1->stats.got, 25.0);
  EXPECT_DOUBLE_EQ(out1->stats.expected, 20.0);
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.aux")->kind, FindingKind::shape_differs);
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.aux")->detail, "A fp32[2, 2], B fp32[4]");
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.idx")->kind, FindingKind::dtype_differs);
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.extra")->kind, FindingKind::only_in_b);
  EXPECT_EQ(find(c, "trial_1/rank_0.safetensors", "")->kind, FindingKind::only_in_a);
  EXPECT_EQ(find(c, "trial_2/rank_0.safetensors", "")->kind, FindingKind::unreadable);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("different seeds (00aa vs 00bb)"), std::string::npos);

  std::string text = format_artifact_comparison(c);
  for (const char* want : {"trial_0/rank_1.safetensors", "DIFFER", "first at [1]: got 25, expected 20", "bitwise equal",
                           "missing in B (a rank or trial B did not dump)", "A fp32[2, 2], B fp32[4]",
                           "note: A and B were dumped", "2 file pairs compared"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

TEST_F(CompareArtifacts, ToleranceIsTheUsersChoice) {
  ArtifactComparison strict = compare_artifact_dirs(a_, b_, {0, 0});
  EXPECT_EQ(find(strict, "trial_0/rank_0.safetensors", "output.out")->kind, FindingKind::differ);
  ArtifactComparison loose = compare_artifact_dirs(a_, b_, {10, 0});
  EXPECT_EQ(find(loose, "trial_0/rank_1.safetensors", "output.out")->kind, FindingKind::agree);
}

TEST_F(CompareArtifacts, EachOutputHeldToTheRuleADumpStates) {
  // pkb's --dump states every output's rule; a PyTorch side (B) states none.
  auto dir = root_ / "rules";
  std::map<std::string, std::string> rules{
      {"compare.output.radii", "1 0"}, {"compare.output.exact", "exact"}, {"compare.output.loose", "0.1 0"}};
  write_safetensors(dir / "A/trial_0/rank_0.safetensors",
                    {i32("output.radii", {4, 7}), f32("output.exact", {1, 2}), f32("output.loose", {1, 2})}, rules);
  write_safetensors(dir / "B/trial_0/rank_0.safetensors",
                    {i32("output.radii", {5, 7}), f32("output.exact", {1, 2.0001f}), f32("output.loose", {1.05f, 2})});
  ArtifactComparison c = compare_artifact_dirs(dir / "A", dir / "B", {1e-2, 1e-2}, {false, false});
  EXPECT_EQ(c.own_rules, 3u);
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.radii")->kind, FindingKind::agree);  // +-1 stated
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.exact")->kind, FindingKind::differ);  // 1e-4 off an exact output
  EXPECT_EQ(find(c, "trial_0/rank_0.safetensors", "output.loose")->kind, FindingKind::agree);  // 0.05 within its 0.1
  EXPECT_NE(format_artifact_comparison(c).find("each output's rule from A's dump"), std::string::npos);
  // --atol given: it replaces the stated atol; exact stays exact.
  ArtifactComparison g = compare_artifact_dirs(dir / "A", dir / "B", {1e-3, 0}, {true, false});
  EXPECT_EQ(find(g, "trial_0/rank_0.safetensors", "output.radii")->kind, FindingKind::differ);
  EXPECT_EQ(find(g, "trial_0/rank_0.safetensors", "output.exact")->kind, FindingKind::differ);
  EXPECT_EQ(find(g, "trial_0/rank_0.safetensors", "output.loose")->kind, FindingKind::differ);
  // A rule that is neither form is a finding that names it, not a crash.
  write_safetensors(dir / "A/trial_0/rank_0.safetensors", {f32("output.exact", {1, 2})}, {{"compare.output.exact", "close"}});
  ArtifactComparison bad = compare_artifact_dirs(dir / "A", dir / "B", {1e-2, 1e-2}, {false, false});
  auto* f = find(bad, "trial_0/rank_0.safetensors", "output.exact");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, FindingKind::unreadable);
  EXPECT_NE(f->detail.find("close"), std::string::npos) << f->detail;
}

TEST_F(CompareArtifacts, IdenticalDirectoriesAgree) {
  fs::remove_all(a_ / "trial_1");
  fs::remove_all(a_ / "trial_2");
  ArtifactComparison c = compare_artifact_dirs(a_, a_, {0, 0});
  EXPECT_TRUE(c.all_agree());
}

TEST_F(CompareArtifacts, ClearErrorsForMissingPaths) {
  EXPECT_THROW(compare_artifact_dirs(a_, root_ / "nope", {}), Error);
  EXPECT_THROW(compare_artifact_dirs(a_ / "trial_0/rank_0.safetensors", b_, {}), Error);
  fs::create_directories(root_ / "e1");
  fs::create_directories(root_ / "e2");
  EXPECT_THROW(compare_artifact_dirs(root_ / "e1", root_ / "e2", {}), Error);
}

TEST_F(CompareArtifacts, InspectShowsShapesDtypesAndValues) {
  std::string s = format_inspection(a_ / "trial_0");
  for (const char* want : {"rank_0.safetensors  (seed=00aa)", "output.out", "fp32[4]", "min 1 max 4 mean 2.5",
                           "first: [1, 2, 3, 4]", "int32[2]", "rank_1.safetensors"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_NE(format_inspection(a_ / "trial_0/rank_1.safetensors", 2).find("first: [10, 20, ...]"), std::string::npos);
  EXPECT_THROW(format_inspection(root_ / "missing"), Error);
}

TEST(CompareResults, ProblemsSideBySide) {
  auto dir = fs::temp_directory_path() / ("pkb_cmpres_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto rec = [](const std::string& stem, int id, const std::string& status, std::optional<double> speedup,
                std::string kind = "eval") {
    testing::Rec r;
    r.kind = kind;
    r.label = "x";
    r.stem = stem;
    r.id = id;
    r.status = status;
    r.speedup = speedup;
    return testing::record_json(r).dump() + "\n";
  };
  std::ofstream(dir / "a.jsonl") << rec("1_allreduce", 1, "ok", 1.5) << rec("2_allgather", 2, "mismatch", std::nullopt);
  std::ofstream(dir / "b.jsonl") << rec("1_allreduce", 1, "ok", 3.0) << rec("1_allreduce", 1, "ok", 1.2)
                                 << rec("7_reducescatter", 7, "ok", 1.0)
                                 << rec("1_allreduce", 1, "ok", 30.0, "full_part");  // a --full cell: not compared
  ResultsDiff d = compare_result_files(dir / "a.jsonl", dir / "b.jsonl");
  EXPECT_EQ(d.cells_left_out, 1u);
  ASSERT_EQ(d.rows.size(), 3u);
  EXPECT_EQ(d.rows[0].problem, "1_allreduce");
  ASSERT_TRUE(d.rows[0].ratio);
  EXPECT_NEAR(*d.rows[0].ratio, 2.0, 1e-12);  // A 20 us, B's fastest correct 10 us
  EXPECT_FALSE(d.rows[1].b);
  EXPECT_FALSE(d.rows[2].a);
  std::string text = format_results_diff(d, true);
  for (const char* want : {"1_allreduce", "ok 20.00 us (1.50x)", "ok 10.00 us (3.00x)", "2.000", "mismatch", "A ",
                           "a.jsonl:2: it went wrong", "7_reducescatter", "1 cell record of `pkb eval --full` left out"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_EQ(format_results_diff(d, false).find("it went wrong"), std::string::npos);
  EXPECT_THROW(compare_result_files(dir / "a.jsonl", dir / "missing.jsonl"), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pkb
