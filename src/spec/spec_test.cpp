#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "spec/registry.hpp"
#include "spec/spec.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

class SpecTest : public ::testing::Test {
 protected:
  fs::path root;
  void SetUp() override {
    root = fs::temp_directory_path() / ("pkb_spec_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  fs::path write(const std::string& stem, const std::string& toml) {
    fs::path d = root / stem;
    fs::create_directories(d);
    std::ofstream(d / "spec.toml") << toml;
    std::ofstream(d / "reference.cu") << "// reference\n";
    return d;
  }
  std::string error_of(const fs::path& dir) {
    try {
      load_spec(dir);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

const char* kScatter = R"(
id = 5
name = "scatter"
pattern = "scatter"
summary = "root sends chunk r to rank r"
dtypes = ["bf16", "fp32"]
world = { min = 2, max = 8 }
default_size = "default"
params = { root = 0, K = "M * 2" }
constraints = [ { expr = "M % W == 0", message = "M must divide by W" } ]
[[sizes]]
name = "small"
M = 64
N = 32
[[sizes]]
name = "default"
M = 1024
N = 1024
[[inputs]]
name = "tensor"
shape = ["M", "N"]
shape_if = [ { when = "rank == root", shape = ["W", "M", "N"] } ]
init = { dist = "grid", low = -4, high = 4, scale = 0.5 }
[[outputs]]
name = "out"
shape = ["M / W", "N"]
[[groups]]
name = "pairs"
color = "rank // 2"
[tolerance]
atol = 0.01
rtol = 0.02
[tolerance.fp32]
atol = 1e-5
)";

TEST_F(SpecTest, LoadsAndResolvesPerRank) {
  Spec s = load_spec(write("5_scatter", kScatter));
  EXPECT_EQ(s.id, 5);
  EXPECT_EQ(s.default_size, "default");
  EXPECT_EQ(s.hash.size(), 64u);
  Instance inst = resolve(s, 4, {"small", {}}, DType::bf16);
  ASSERT_EQ(inst.ranks.size(), 4u);
  EXPECT_EQ(inst.ranks[0].inputs[0].shape, (std::vector<long long>{4, 64, 32}));
  EXPECT_EQ(inst.ranks[1].inputs[0].shape, (std::vector<long long>{64, 32}));
  EXPECT_EQ(inst.ranks[2].outputs[0].shape, (std::vector<long long>{16, 32}));
  EXPECT_EQ(inst.ranks[3].groups[0].color, 1);
  EXPECT_EQ(inst.ranks[0].inputs[0].dist.kind, DistKind::grid);
  EXPECT_EQ(inst.ranks[0].inputs[0].dist.hi, 4);
  EXPECT_DOUBLE_EQ(inst.vars.at("K"), 128);
  EXPECT_DOUBLE_EQ(inst.tolerance.rtol, 0.02);
  Instance f32 = resolve(s, 2, {"", {}}, DType::fp32);
  EXPECT_DOUBLE_EQ(f32.tolerance.atol, 1e-5);
  EXPECT_EQ(f32.size_name, "default");
  Instance custom = resolve(s, 2, {"small", {{"M", 128}}}, DType::bf16);
  EXPECT_EQ(custom.ranks[1].outputs[0].shape[0], 64);
}

TEST_F(SpecTest, RejectsBadInstancesWithOneClearLine) {
  Spec s = load_spec(write("5_scatter", kScatter));
  auto msg = [&](int w, SizeChoice sc, DType d) {
    try {
      resolve(s, w, sc, d);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(3, {"small", {}}, DType::bf16).find("M must divide by W"), std::string::npos);
  EXPECT_NE(msg(9, {"small", {}}, DType::bf16).find("2 to 8 GPUs"), std::string::npos);
  EXPECT_NE(msg(2, {"small", {}}, DType::fp16).find("does not support dtype fp16"), std::string::npos);
  EXPECT_NE(msg(2, {"huge", {}}, DType::bf16).find("no size class 'huge'"), std::string::npos);
  EXPECT_NE(msg(2, {"small", {{"Q", 3}}}, DType::bf16).find("no size variable 'Q' (its size variables: M, N)"),
            std::string::npos);
  EXPECT_NE(msg(2, {"small", {{"W", 4}}}, DType::bf16).find("set it with --gpus"), std::string::npos);
  EXPECT_NE(msg(2, {"small", {{"M", -8}}}, DType::bf16).find("M must be positive, not -8"), std::string::npos);
  EXPECT_THROW(s.require_overrides({"", {{"e", 1}}}), Error);  // the element size is derived, not a size variable
  EXPECT_NO_THROW(s.require_overrides({"", {{"M", 64}}}));
}

TEST_F(SpecTest, MalformedSpecsNameFileKeyAndReason) {
  struct Case {
    std::string edit_from, edit_to, expect;
  };
  std::vector<Case> cases{
      {"pattern = \"scatter\"", "pattern = \"scatter\"\ncolour = 1", "colour: unknown key"},
      {"shape = [\"M / W\", \"N\"]", "shape = [\"M / W\", \"Q\"]", "outputs[0].shape: unknown variable 'Q'"},
      {"dist = \"grid\"", "dist = \"gaussian\"", "unknown distribution 'gaussian'"},
      {"shape = [\"M / W\", \"N\"]", "shape = \"M\"", "outputs[0].shape: must be an array"},
      {"id = 5", "id = 6", "folder must be named"},
      {"dtypes = [\"bf16\", \"fp32\"]", "dtypes = [\"bf17\"]", "dtypes[0]: unknown dtype"},
      {"color = \"rank // 2\"", "color = \"rank // \"", "groups[0].color"},
      {"[[inputs]]", "[[inputs]\n", "spec.toml:"},
      {"root = 0", "root = 9007199254740993", "params.root: integer 9007199254740993 is beyond 2^53"},
  };
  for (auto& c : cases) {
    std::string text = kScatter;
    auto pos = text.find(c.edit_from);
    ASSERT_NE(pos, std::string::npos) << c.edit_from;
    text.replace(pos, c.edit_from.size(), c.edit_to);
    std::string err = error_of(write("5_scatter", text));
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
    EXPECT_NE(err.find("spec.toml"), std::string::npos) << err;
  }
}

TEST_F(SpecTest, RegistryFindsByIdStemNameAndSuggests) {
  write("5_scatter", kScatter);
  fs::create_directories(root / "not_a_problem");
  auto all = discover_problems(root);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(find_problem(all, "5").stem, "5_scatter");
  EXPECT_EQ(find_problem(all, "scatter").stem, "5_scatter");
  EXPECT_EQ(find_problem(all, "5_scatter").stem, "5_scatter");
  EXPECT_EQ(find_problem(all, (root / "5_scatter" / "spec.toml").string()).stem, "5_scatter");
  try {
    find_problem(all, "scater");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

// Every real problem in the repository loads and resolves at every world size it allows (up to 8).
TEST(RealProblems, AllSpecsLoadAndResolve) {
  const char* src = std::getenv("PKB_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto all = discover_problems(fs::path(src) / "problems");
  ASSERT_GE(all.size(), 8u);
  for (auto& e : all) {
    Spec s = load_spec(e.dir);
    for (auto& sz : s.sizes)
      for (int w : {2, 4, 8})
        if (w >= s.min_world && w <= s.max_world)
          for (auto d : s.dtypes) EXPECT_NO_THROW(resolve(s, w, {sz.name, {}}, d)) << e.stem << " W=" << w << " " << sz.name;
  }
}

TEST_F(SpecTest, SplitSharedAndMutableInputs) {
  auto dir = write("27_splits", R"(
id = 27
name = "splits"
pattern = "all-to-all with splits"
summary = "s"
dtypes = ["bf16"]
default_size = "default"
[[sizes]]
name = "default"
M = 100
N = 8
[[inputs]]
name = "x"
shape = ["M", "N"]
mutable = true
[[inputs]]
name = "gamma"
shape = ["N"]
shared = true
[[inputs]]
name = "send"
dtype = "int64"
shape = ["W"]
init = { dist = "split", total = "M", side = "send" }
[[inputs]]
name = "recv"
dtype = "int64"
shape = ["W"]
init = { dist = "split", total = "M", side = "recv", matrix = 0 }
[[outputs]]
name = "y"
shape = ["M", "N"]
)");
  Spec s = load_spec(dir);
  Instance inst = resolve(s, 4, {}, DType::bf16);
  const auto& in = inst.ranks[2].inputs;
  EXPECT_TRUE(in[0].mutable_);
  EXPECT_FALSE(in[0].dist.shared);
  EXPECT_TRUE(in[1].dist.shared);
  EXPECT_FALSE(in[1].mutable_);
  EXPECT_EQ(in[2].dist.kind, DistKind::split);
  EXPECT_TRUE(in[2].dist.shared);
  EXPECT_EQ(in[2].dist.slot, in[3].dist.slot);
  EXPECT_EQ(in[2].dist.lo, 100);
  EXPECT_EQ(in[2].dist.hi, 4);
  EXPECT_EQ(in[2].dist.b, 2.0);
  EXPECT_EQ(in[2].dist.a, 0.0);
  EXPECT_EQ(in[3].dist.a, 1.0);
}

TEST_F(SpecTest, SplitErrorsNameTheProblem) {
  const char* base = R"(
id = 27
name = "splits"
pattern = "p"
summary = "s"
dtypes = ["bf16"]
default_size = "default"
[[sizes]]
name = "default"
M = 100
[[outputs]]
name = "y"
shape = ["M"]
[[inputs]]
name = "send"
)";
  EXPECT_NE(error_of(write("27_splits",
                           std::string(base) +
                               "dtype = \"int64\"\nshape = [\"W\"]\ninit = { dist = \"split\", total = \"M\", side = \"up\" }\n"))
                .find("side"),
            std::string::npos);
  EXPECT_NE(error_of(write("27_splits", std::string(base) +
                                            "dtype = \"int64\"\nshape = [\"W\"]\ninit = { dist = \"split\", side = \"send\" }\n"))
                .find("total"),
            std::string::npos);
  EXPECT_NE(error_of(write("27_splits", std::string(base) + "shape = [\"W\"]\nshared = 1\n")).find("true or false"),
            std::string::npos);
  Spec s = load_spec(write(
      "27_splits",
      std::string(base) + "dtype = \"int64\"\nshape = [\"M\"]\ninit = { dist = \"split\", total = \"M\", side = \"send\" }\n"));
  try {
    resolve(s, 2, {}, DType::bf16);
    ADD_FAILURE() << "a split input of shape [M] was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape must be [W]"), std::string::npos) << e.what();
  }
}

const char* kCounts = R"(
id = 26
name = "counts"
pattern = "p"
summary = "s"
dtypes = ["bf16", "fp32"]
default_size = "default"
[[sizes]]
name = "default"
M = 64
[[inputs]]
name = "x"
shape = ["M"]
[[outputs]]
name = "splits"
dtype = "int64"
shape = ["W"]
[[outputs]]
name = "y"
shape = ["M"]
[[outputs]]
name = "v"
shape = ["M"]
tolerance = { atol = 1e-6, fp32 = { rtol = 1e-4 } }
[[outputs]]
name = "counts"
dtype = "fp32"
shape = ["M"]
compare = "exact"
[[outputs]]
name = "ids"
dtype = "int32"
shape = ["M"]
tolerance = { atol = 1 }
[tolerance]
atol = 0.5
rtol = 0.25
[tolerance.fp32]
atol = 1e-5
)";

TEST_F(SpecTest, OutputsCarryTheirComparison) {
  Spec s = load_spec(write("26_counts", kCounts));
  Instance bf = resolve(s, 2, {}, DType::bf16);
  const auto& o = bf.ranks[1].outputs;
  EXPECT_TRUE(o[0].compare.exact());  // int64, nothing declared: exact
  EXPECT_FALSE(o[1].compare.exact());
  EXPECT_DOUBLE_EQ(o[1].compare.tol.atol, 0.5);  // the problem's
  EXPECT_DOUBLE_EQ(o[1].compare.tol.rtol, 0.25);
  EXPECT_DOUBLE_EQ(o[2].compare.tol.atol, 1e-6);  // its own atol, instead of the problem's 0.5
  EXPECT_DOUBLE_EQ(o[2].compare.tol.rtol, 0.25);  // the problem's rtol
  EXPECT_TRUE(o[3].compare.exact());  // fp32, compare = "exact"
  EXPECT_FALSE(o[4].compare.exact());  // int32 with its own tolerance
  EXPECT_DOUBLE_EQ(o[4].compare.tol.atol, 1.0);
  EXPECT_DOUBLE_EQ(o[4].compare.tol.rtol, 0.0);  // an integer output never takes the problem's
  EXPECT_EQ(comparison_text(o[0].compare), "exact");
  EXPECT_EQ(comparison_text(o[2].compare), "atol 1e-06, rtol 0.25");

  Instance f32 = resolve(s, 2, {}, DType::fp32);
  const auto& p = f32.ranks[0].outputs;
  // [tolerance.fp32] sets only atol: its rtol comes from [tolerance] (it used to be the default 1e-2).
  EXPECT_DOUBLE_EQ(f32.tolerance.atol, 1e-5);
  EXPECT_DOUBLE_EQ(f32.tolerance.rtol, 0.25);
  EXPECT_DOUBLE_EQ(p[1].compare.tol.rtol, 0.25);
  EXPECT_DOUBLE_EQ(p[2].compare.tol.atol, 1e-6);  // the output's atol over [tolerance.fp32]'s
  EXPECT_DOUBLE_EQ(p[2].compare.tol.rtol, 1e-4);  // the output's tolerance.fp32

  // --atol / --rtol: every floating output compared by tolerance; exact and integer ones stay.
  override_tolerance(bf, 0.125, std::nullopt);
  EXPECT_DOUBLE_EQ(bf.tolerance.atol, 0.125);
  for (auto& rp : bf.ranks) {
    EXPECT_DOUBLE_EQ(rp.outputs[1].compare.tol.atol, 0.125);
    EXPECT_DOUBLE_EQ(rp.outputs[2].compare.tol.atol, 0.125);
    EXPECT_DOUBLE_EQ(rp.outputs[2].compare.tol.rtol, 0.25);
    EXPECT_TRUE(rp.outputs[0].compare.exact());
    EXPECT_TRUE(rp.outputs[3].compare.exact());
    EXPECT_DOUBLE_EQ(rp.outputs[4].compare.tol.atol, 1.0);
  }
}

TEST_F(SpecTest, RaggedOutputsNameACountThatIsOneExactInteger) {
  std::string base = R"(
id = 9
name = "rag"
pattern = "p"
summary = "s"
dtypes = ["bf16"]
[[sizes]]
name = "s"
M = 8
[[inputs]]
name = "x"
shape = ["M", 4]
[[outputs]]
name = "rows"
shape = ["M", 4]
count = "n"
[[outputs]]
name = "n"
dtype = "int32"
shape = [1]
)";
  Spec s = load_spec(write("9_rag", base));
  EXPECT_EQ(s.outputs[0].count, "n");
  Instance inst = resolve(s, 2, {}, DType::bf16);
  for (auto& rp : inst.ranks) {
    EXPECT_EQ(rp.outputs[0].count_of, 1);
    EXPECT_EQ(rp.outputs[0].row_elems(), 4u);
    EXPECT_EQ(rp.outputs[1].count_of, -1);
    EXPECT_TRUE(rp.outputs[1].compare.exact());
  }
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  auto expect_error = [&](const std::string& text, const std::string& want) {
    std::string e = error_of(write("9_rag", text));
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  expect_error(with("count = \"n\"", "count = \"m\""), "outputs[0].count: output 'rows': no output named 'm'");
  expect_error(with("count = \"n\"", "count = \"rows\""), "cannot hold its own count");
  expect_error(with("count = \"n\"", "count = 3"), "outputs[0].count");
  expect_error(with("dtype = \"int32\"", "dtype = \"fp32\""), "must have dtype \"int32\" or \"int64\"");
  expect_error(with("dtype = \"int32\"", "dtype = \"int32\"\ncompare = \"tolerance\""), "must be compared exactly");
  expect_error(with("dtype = \"int32\"", "dtype = \"int32\"\ncount = \"rows\""), "is a ragged output itself");
  // Shapes are known only when resolved: a count of two elements, a ragged output without rows.
  auto resolve_error = [&](const std::string& text) -> std::string {
    try {
      Spec sp = load_spec(write("9_rag", text));
      resolve(sp, 2, {}, DType::bf16);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string e = resolve_error(with("shape = [1]", "shape = [2]"));
  EXPECT_NE(e.find("output 'n' counts the rows of 'rows', so it must have exactly one element"), std::string::npos) << e;
  e = resolve_error(with("shape = [\"M\", 4]\ncount", "shape = []\ncount"));
  EXPECT_NE(e.find("output 'rows' has a count, so it needs a first dimension"), std::string::npos) << e;
}

TEST_F(SpecTest, TheDefaultDtypeIsBf16WhereListedElseTheFirst) {
  Spec with_bf16 = load_spec(write("5_scatter", kScatter));  // dtypes = ["bf16", "fp32"]
  EXPECT_EQ(with_bf16.default_dtype(), DType::bf16);
  std::string text = kScatter;
  text.replace(text.find("[\"bf16\", \"fp32\"]"), 16, "[\"fp32\", \"fp16\"]");
  Spec without = load_spec(write("5_scatter", text));
  EXPECT_EQ(without.default_dtype(), DType::fp32);
  EXPECT_EQ(without.dtype_or_default(""), DType::fp32);
  EXPECT_EQ(without.dtype_or_default("half"), DType::fp16);
  try {
    without.dtype_or_default("fp12");
    ADD_FAILURE() << "an unknown dtype name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dtype 'fp12'"), std::string::npos) << e.what();
  }
}

TEST_F(SpecTest, HeldOutInputsAndBounds) {
  std::string base = R"(
id = 9
name = "held"
pattern = "p"
summary = "s"
dtypes = ["bf16", "fp32"]
[[sizes]]
name = "s"
M = 8
[[inputs]]
name = "x"
shape = ["M"]
init = { dist = "grid", low = -4, high = 4, scale = 0.5 }
[[inputs]]
name = "router"
shape = ["M"]
init = { dist = "grid", low = -1, high = 1, scale = 1 }
heldout = "keep"
[[inputs]]
name = "ids"
shape = ["M"]
dtype = "int64"
init = { dist = "grid", low = 0, high = 7, scale = 1 }
[[inputs]]
name = "noise"
shape = ["M"]
init = { dist = "normal" }
[[outputs]]
name = "y"
shape = ["M"]
[[outputs]]
name = "n"
shape = ["M"]
dtype = "int64"
)";
  Spec s = load_spec(write("9_held", base));
  Instance bf = resolve(s, 2, {}, DType::bf16);
  EXPECT_TRUE(bf.heldout);
  const auto& in = bf.ranks[0].inputs;
  EXPECT_TRUE(in[0].dist.heldout);  // a floating grid
  EXPECT_FALSE(in[1].dist.heldout);  // kept on its grid
  EXPECT_FALSE(in[2].dist.heldout);  // integers
  EXPECT_FALSE(in[3].dist.heldout);  // continuous already
  EXPECT_DOUBLE_EQ(bf.ranks[0].outputs[0].compare.heldout_rtol, 0x1p-7);
  EXPECT_DOUBLE_EQ(resolve(s, 2, {}, DType::fp32).ranks[0].outputs[0].compare.heldout_rtol, 0x1p-15);
  EXPECT_TRUE(bf.ranks[0].outputs[1].compare.exact());

  std::string nf = base;
  nf.replace(nf.find("name = \"y\"\n"), 11, "name = \"y\"\nnonfinite = \"as_baseline\"\n");
  Spec u = load_spec(write("9_held", nf));
  EXPECT_TRUE(resolve(u, 2, {}, DType::bf16).ranks[0].outputs[0].compare.nonfinite_as_expected);
  EXPECT_FALSE(bf.ranks[0].outputs[0].compare.nonfinite_as_expected);
  nf.replace(nf.find("as_baseline"), 11, "yes");
  EXPECT_NE(error_of(write("9_held", nf)).find("outputs[0].nonfinite"), std::string::npos) << error_of(write("9_held", nf));

  Spec t = load_spec(write("9_held", base + "[heldout]\nrtol = 0.05\n"));
  EXPECT_DOUBLE_EQ(resolve(t, 2, {}, DType::fp32).ranks[0].outputs[0].compare.heldout_rtol, 0.05);
  // The spec's bound only widens a dtype's default: 2^-10 loosens fp32 (2^-15), not bf16 (2^-7).
  Spec tf = load_spec(write("9_held", base + "[heldout]\nrtol = 0.0009765625\n"));
  EXPECT_DOUBLE_EQ(resolve(tf, 2, {}, DType::fp32).ranks[0].outputs[0].compare.heldout_rtol, 0x1p-10);
  EXPECT_DOUBLE_EQ(resolve(tf, 2, {}, DType::bf16).ranks[0].outputs[0].compare.heldout_rtol, 0x1p-7);
  EXPECT_NE(error_of(write("9_held", base + "[heldout]\nrtol = 2\n")).find("heldout.rtol"), std::string::npos);
  EXPECT_NE(error_of(write("9_held", base + "[heldout]\nbound = 0.1\n")).find("unknown key"), std::string::npos);
  std::string bad = base;
  bad.replace(bad.find("heldout = \"keep\""), 16, "heldout = true");
  EXPECT_NE(error_of(write("9_held", bad)).find("inputs[1].heldout"), std::string::npos) << error_of(write("9_held", bad));
}

TEST_F(SpecTest, BadComparisonKeysAreNamedWithTheirLine) {
  struct Case {
    std::string edit_from, edit_to, expect;
  };
  std::vector<Case> cases{
      {"compare = \"exact\"", "compare = \"fuzzy\"", "spec.toml:29: outputs[3].compare: must be \"exact\""},
      {"compare = \"exact\"", "compare = true", "outputs[3].compare: must be"},
      {"compare = \"exact\"", "compare = \"exact\"\ntolerance = { atol = 0 }",
       "outputs[3].tolerance: this output has compare = \"exact\""},
      {"tolerance = { atol = 1 }", "tolerance = { atol = -1 }",
       "outputs[4].tolerance.atol: must be a finite number >= 0, not -1"},
      {"tolerance = { atol = 1 }", "tolerance = { atol = \"1\" }", "outputs[4].tolerance.atol: must be a number"},
      {"tolerance = { atol = 1 }", "tolerance = { atl = 1 }", "outputs[4].tolerance.atl: unknown key"},
      {"tolerance = { atol = 1 }", "tolerance = 1", "outputs[4].tolerance: must be a table"},
      {"tolerance = { atol = 1 }", "atol = 1", "outputs[4].atol: an output's own tolerance is a table"},
      {"fp32 = { rtol = 1e-4 }", "fp32 = { rtol = 1e-4, fp16 = { atol = 1 } }",
       "outputs[2].tolerance.fp32.fp16: unknown key (atol, rtol)"},
      {"fp32 = { rtol = 1e-4 }", "fp33 = { rtol = 1e-4 }", "outputs[2].tolerance.fp33: unknown key"},
      {"[tolerance.fp32]\natol = 1e-5", "[tolerance.fp32]\natol = nan", "tolerance.fp32.atol: must be a finite number >= 0"},
      {"rtol = 0.25", "rtol = -0.25", "spec.toml:37: tolerance.rtol: must be a finite number >= 0"},
      {"name = \"ids\"", "name = \"ids\"\nexact = true", "outputs[4].exact: unknown key"},
  };
  for (auto& c : cases) {
    std::string text = kCounts;
    auto pos = text.find(c.edit_from);
    ASSERT_NE(pos, std::string::npos) << c.edit_from;
    text.replace(pos, c.edit_from.size(), c.edit_to);
    std::string err = error_of(write("26_counts", text));
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
  }
}

const char* kTrainStep = R"spec(
id = 48
name = "train"
pattern = "p"
summary = "s"
dtypes = ["bf16"]
world = { min = 2, max = 8 }
constraints = [ { expr = "W % 2 == 0", message = "W must be even" } ]
params = { lr = 1e-3, beta1 = 0.9, root = 0, step = { trial_low = 1, trial_high = "W + 5" } }
[[sizes]]
name = "default"
M = 16
[[inputs]]
name = "x"
shape = ["M"]
init = { dist = "normal", std = "beta1", shared_by = "rank // 2" }
[[inputs]]
name = "w"
shape = ["M"]
init = { dist = "grid", shared_by = "rank % (W // 2)" }
[[outputs]]
name = "y"
shape = ["M"]
)spec";

TEST_F(SpecTest, SharedByGivesEachRankItsGroupsValue) {
  Spec s = load_spec(write("48_train", kTrainStep));
  Instance inst = resolve(s, 8, {}, DType::bf16);
  for (auto& rp : inst.ranks) {
    EXPECT_EQ(rp.inputs[0].dist.share_group, rp.rank / 2);
    EXPECT_EQ(rp.inputs[1].dist.share_group, rp.rank % 4);
    EXPECT_FALSE(rp.inputs[0].dist.shared);
  }
  EXPECT_DOUBLE_EQ(inst.ranks[0].inputs[0].dist.b, 0.9);  // a float parameter in a distribution
}

TEST_F(SpecTest, FloatAndPerCallParams) {
  Spec s = load_spec(write("48_train", kTrainStep));
  ASSERT_EQ(s.float_params.size(), 2u);
  ASSERT_EQ(s.trial_params.size(), 1u);
  Instance inst = resolve(s, 4, {}, DType::bf16);
  EXPECT_DOUBLE_EQ(inst.vars.at("lr"), 1e-3);
  ASSERT_EQ(inst.trial_params.size(), 1u);
  EXPECT_EQ(inst.trial_params[0].low, 1);
  EXPECT_EQ(inst.trial_params[0].high, 9);
  EXPECT_FALSE(inst.vars.count("step"));  // not a variable of shapes or distributions
  auto ints = inst.int_params();
  bool root = false;
  for (auto& [k, v] : ints) {
    EXPECT_NE(k, "lr");
    EXPECT_NE(k, "beta1");
    EXPECT_NE(k, "e");
    root |= k == "root";
  }
  EXPECT_TRUE(root);
  std::set<double> steps;
  for (uint64_t t = 0; t < 64; ++t) {
    Vars v = call_vars(inst, 1000 + t, t);
    EXPECT_EQ(v.at("step"), static_cast<double>(trial_param_value(1000 + t, t, 0, inst.trial_params[0])));
    EXPECT_GE(v.at("step"), 1);
    EXPECT_LE(v.at("step"), 9);
    EXPECT_DOUBLE_EQ(v.at("lr"), 1e-3);
    steps.insert(v.at("step"));
  }
  EXPECT_GT(steps.size(), 5u);
}

TEST_F(SpecTest, SharedByAndParamErrorsNameTheInputAndKey) {
  struct Case {
    std::string from, to, expect;
  };
  std::vector<Case> cases{
      {"shared_by = \"rank // 2\"", "shared_by = \"rank / 2\"",
       "inputs[0].init.shared_by: input 'x': `rank / 2` is 0.5 at rank 1, W = 2; it must be a whole number >= 0 (use // for "
       "integer division)"},
      {"shared_by = \"rank // 2\"", "shared_by = \"rank - 1\"",
       "inputs[0].init.shared_by: input 'x': `rank - 1` is -1 at rank 0"},
      {"shared_by = \"rank // 2\"", "shared_by = \"rank // tp\"", "inputs[0].init.shared_by: unknown variable 'tp'"},
      {"shared_by = \"rank // 2\"", "shared_by = \"rank // step\"", "a per-call parameter"},
      {"shared_by = \"rank // 2\"", "shared_by = 2", "inputs[0].init.shared_by: must be an expression string"},
      {"shared_by = \"rank // 2\"", "shared_by = \"rank //\"", "inputs[0].init.shared_by:"},
      {"shape = [\"M\"]\ninit = { dist = \"normal\"", "shape = [\"M\"]\nshared = true\ninit = { dist = \"normal\"",
       "inputs[0].init.shared_by: input 'x' says both `shared = true`"},
      {"dist = \"grid\", shared_by", "dist = \"split\", total = \"M\", side = \"send\", shared_by",
       "inputs[1].init.shared_by: a split matrix is already the same on every rank"},
      {"trial_high = \"W + 5\"", "trial_hi = 7", "params.step.trial_hi: unknown key"},
      {"trial_low = 1, trial_high = \"W + 5\"", "trial_low = 1", "params.step: a per-call parameter needs both"},
      {"trial_high = \"W + 5\"", "trial_high = \"Q\"", "params.step.trial_high: unknown variable 'Q'"},
      {"shape = [\"M\"]\ninit = { dist = \"normal\"", "shape = [\"step\"]\ninit = { dist = \"normal\"",
       "inputs[0].shape: `step` reads 'step', a per-call parameter"},
      {"lr = 1e-3", "lr = nan", "params.lr: must be a finite number"},
  };
  for (auto& c : cases) {
    std::string text = kTrainStep;
    auto pos = text.find(c.from);
    ASSERT_NE(pos, std::string::npos) << c.from;
    text.replace(pos, c.from.size(), c.to);
    std::string err = error_of(write("48_train", text));
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
  }
  // A shared_by that reads a size is checked when the spec resolves, naming the input.
  std::string text = kTrainStep;
  std::string from = "shared_by = \"rank // 2\"";
  text.replace(text.find(from), from.size(), "shared_by = \"rank / M\"");
  Spec s = load_spec(write("48_train", text));
  try {
    resolve(s, 2, {}, DType::bf16);
    ADD_FAILURE() << "rank / M resolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x': `rank / M` is 0.0625 at rank 1"), std::string::npos) << e.what();
  }
  text = kTrainStep;
  from = "trial_low = 1";
  text.replace(text.find(from), from.size(), "trial_low = 20");
  s = load_spec(write("48_train", text));
  try {
    resolve(s, 2, {}, DType::bf16);
    ADD_FAILURE() << "trial_low > trial_high resolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'step' has trial_low 20 > trial_high 7"), std::string::npos) << e.what();
  }
}

TEST(TensorPlanListing, RanksListTogetherOnlyWhenDrawnAlike) {
  TensorPlan a;
  a.shape = {4, 8};
  a.dist.kind = DistKind::split;
  a.dist.b = 0;  // a split's b is the rank: not part of how it reads
  TensorPlan b = a;
  b.dist.b = 1;
  EXPECT_TRUE(same_listing(a, b));
  b.dist.a = 3;  // another total
  EXPECT_FALSE(same_listing(a, b));
  TensorPlan x, y;  // outputs carry no draw
  x.shape = y.shape = {16};
  EXPECT_TRUE(same_listing(x, y));
  y.dist.shared = true;
  EXPECT_FALSE(same_listing(x, y));
  y = x;
  y.shape = {32};
  EXPECT_FALSE(same_listing(x, y));
}

const char* kStructured = R"(
id = 29
name = "routes"
pattern = "p"
summary = "s"
dtypes = ["bf16"]
default_size = "default"
[[sizes]]
name = "default"
M = 16
E = 8
B = 4
[[inputs]]
name = "selected"
dtype = "int64"
shape = ["M", 2]
init = { dist = "distinct", n = "E", k = 2 }
[[inputs]]
name = "routing_map"
dtype = "bool"
shape = ["E", "M"]
init = { dist = "distinct", of = "selected", view = "mask" }
[[inputs]]
name = "order"
dtype = "int64"
shape = ["2 * M"]
init = { dist = "distinct", of = "selected", view = "grouped" }
[[inputs]]
name = "expert_mask"
dtype = "fp32"
shape = ["E", 2, "M"]
init = { dist = "distinct", n = "E", k = 2, view = "onehot" }
[[inputs]]
name = "ids"
dtype = "int64"
shape = ["M"]
init = { dist = "owner_ids", high = 1000, matrix = 1 }
[[inputs]]
name = "lengths"
dtype = "int64"
shape = ["3 * B"]
init = { dist = "composition", mean = 12 }
[[inputs]]
name = "row_ptr"
dtype = "int64"
shape = ["M + 1"]
init = { dist = "offsets", mean = 4 }
[[inputs]]
name = "seeds"
dtype = "int64"
shape = ["B"]
init = { dist = "permutation", n = "M", shared_by = "rank // 2" }
[[outputs]]
name = "y"
shape = ["M"]
)";

TEST_F(SpecTest, StructuredDrawsResolveWithTheirShapesAndKeys) {
  Spec s = load_spec(write("29_routes", kStructured));
  Instance inst = resolve(s, 4, {}, DType::bf16);
  const auto& in = inst.ranks[3].inputs;
  EXPECT_EQ(in[0].dist.kind, DistKind::distinct);
  EXPECT_EQ(in[0].dist.lo, 8);
  EXPECT_EQ(in[0].dist.hi, 2);
  EXPECT_EQ(in[0].dist.a, 16.0);
  EXPECT_EQ(in[0].dist.slot, -1);
  for (size_t v : {1, 2}) {  // views: the source's n, k, rows and key
    EXPECT_EQ(in[v].dist.lo, 8);
    EXPECT_EQ(in[v].dist.hi, 2);
    EXPECT_EQ(in[v].dist.a, 16.0);
    EXPECT_EQ(in[v].dist.slot, 0);
    EXPECT_EQ(input_key(7, 1, 3, v, in[v].dist), input_key(7, 1, 3, 0, in[0].dist));
  }
  EXPECT_EQ(in[1].dist.b, static_cast<double>(DistinctView::mask));
  EXPECT_EQ(in[2].dist.b, static_cast<double>(DistinctView::grouped));
  EXPECT_EQ(in[3].dist.b, static_cast<double>(DistinctView::onehot));
  EXPECT_EQ(in[3].dist.a, 16.0);
  EXPECT_FALSE(in[3].dist.heldout);  // integer valued: held-out calls draw it as usual
  EXPECT_EQ(in[4].dist.kind, DistKind::owner_ids);
  EXPECT_TRUE(in[4].dist.shared);
  EXPECT_EQ(in[4].dist.slot, kSplitSlotBase + 1);
  EXPECT_EQ(in[4].dist.lo, 16);
  EXPECT_EQ(in[4].dist.hi, 4);
  EXPECT_EQ(in[4].dist.a, 1000.0);
  EXPECT_EQ(in[4].dist.b, 3.0);
  EXPECT_EQ(in[5].dist.kind, DistKind::composition);
  EXPECT_TRUE(in[5].dist.shared);
  EXPECT_EQ(in[5].dist.lo, 12);
  EXPECT_EQ(in[5].dist.a, 12.0);
  EXPECT_EQ(in[5].dist.b, 3.0);
  EXPECT_EQ(in[6].dist.kind, DistKind::offsets);  // offsets and permutations are keyed as any input
  EXPECT_FALSE(in[6].dist.shared);
  EXPECT_EQ(in[6].dist.lo, 4);
  EXPECT_EQ(in[6].dist.a, 17.0);
  EXPECT_EQ(in[7].dist.kind, DistKind::permutation);
  EXPECT_EQ(in[7].dist.lo, 16);
  EXPECT_EQ(in[7].dist.share_group, 1);
  EXPECT_FALSE(inst.heldout);
  // Ranks list together in `pkb show` where only their rank differs.
  EXPECT_TRUE(same_listing(inst.ranks[0].inputs[4], in[4]));
  EXPECT_TRUE(same_listing(inst.ranks[0].inputs[5], in[5]));
}

TEST_F(SpecTest, StructuredDrawErrorsNameTheInputAndKey) {
  struct Case {
    std::string from, to, expect;
  };
  std::vector<Case> cases{
      {"n = \"E\", k = 2 }", "k = 2 }", "inputs[0].init.n: missing"},
      {"view = \"mask\"", "view = \"rows\"", "inputs[1].init.view: must be"},
      {"of = \"selected\", view = \"mask\"", "of = \"nope\", view = \"mask\"",
       "inputs[1].init.of: input 'routing_map': no input named 'nope'"},
      {"of = \"selected\", view = \"mask\"", "of = \"ids\", view = \"mask\"",
       "inputs[1].init.of: input 'routing_map': 'ids' must be drawn"},
      {"of = \"selected\", view = \"mask\"", "of = \"order\", view = \"mask\"", "'order' must be drawn"},
      {"of = \"selected\", view = \"mask\"", "of = \"selected\", n = 4, view = \"mask\"",
       "inputs[1].init.of: a view takes n and k"},
      {"of = \"selected\", view = \"mask\"", "of = \"selected\", view = \"mask\", shared_by = \"rank\"",
       "inputs[1].init.shared_by"},
      {"high = 1000, matrix = 1", "matrix = 1", "inputs[4].init.high: missing"},
      {"high = 1000, matrix = 1", "high = 1000, total = 4", "inputs[4].init.total: unknown key (allowed: dist, high, matrix)"},
      {"mean = 12 }", "mean = 12, shared_by = \"rank\" }", "inputs[5].init.shared_by: composition draws span every rank"},
      {"dist = \"composition\", mean = 12", "dist = \"compose\", mean = 12", "unknown distribution 'compose'"},
      {"dist = \"offsets\", mean = 4", "dist = \"offsets\"", "inputs[6].init.mean: missing"},
      {"dist = \"offsets\", mean = 4", "dist = \"offsets\", mean = 4, n = 3", "inputs[6].init.n: unknown key"},
      {"n = \"M\", shared_by", "shared_by", "inputs[7].init.n: missing"},
  };
  for (auto& c : cases) {
    std::string text = kStructured;
    auto pos = text.find(c.from);
    ASSERT_NE(pos, std::string::npos) << c.from;
    text.replace(pos, c.from.size(), c.to);
    std::string err = error_of(write("29_routes", text));
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
  }
  // Shapes and ranges are checked when the spec resolves, naming the input.
  std::vector<Case> resolving{
      {"shape = [\"E\", \"M\"]", "shape = [\"M\", \"E\"]", "input 'routing_map' (distinct, n = 8, k = 2) must have shape [n, M]"},
      {"shape = [\"2 * M\"]", "shape = [\"2 * M + 2\"]", "input 'order' (distinct, n = 8, k = 2) must have shape [k * M]"},
      {"shape = [\"M\", 2]", "shape = [\"M\", 3]", "input 'selected' (distinct, n = 8, k = 2) must have shape [..., k]"},
      {"shape = [\"E\", 2, \"M\"]", "shape = [\"E\", \"M\", 2]",
       "input 'expert_mask' (distinct, n = 8, k = 2) must have shape [n, k, M]"},
      {"n = \"E\", k = 2 }", "n = 1, k = 2 }", "input 'selected': init.n: must be at least k"},
      {"n = \"E\", k = 2 }", "n = \"E\", k = 17 }", "input 'selected': init.k: must be in [1, 16]"},
      {"high = 1000", "high = 2", "input 'ids': init.high: must be a whole number in [W, 2^53]"},
      {"dtype = \"int64\"\nshape = [\"M\"]\ninit = { dist = \"owner_ids\"", "shape = [\"M\"]\ninit = { dist = \"owner_ids\"",
       "input 'ids': init.dist: owner_ids are integers"},
      {"dtype = \"int64\"\nshape = [\"M + 1\"]", "shape = [\"M + 1\"]", "input 'row_ptr': init.dist: offsets is integer"},
      {"mean = 4 }", "mean = -1 }", "input 'row_ptr': init.mean: must be in [0, 2^40]"},
      {"n = \"M\", shared_by", "n = \"B - 1\", shared_by",
       "input 'seeds': init.n: must be in [1, 2^53] and at least the element count 4"},
  };
  for (auto& c : resolving) {
    std::string text = kStructured;
    auto pos = text.find(c.from);
    ASSERT_NE(pos, std::string::npos) << c.from;
    text.replace(pos, c.from.size(), c.to);
    Spec s = load_spec(write("29_routes", text));
    try {
      resolve(s, 4, {}, DType::bf16);
      ADD_FAILURE() << "resolved: " << c.to;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e.what();
    }
  }
}

}  // namespace
}  // namespace pkb
