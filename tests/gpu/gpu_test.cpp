// GPU integration tests: drive the real `pkb` binary on real GPUs and check its JSON records.
// They skip (exit 77 through CTest's SKIP_RETURN_CODE) where no GPU is visible. A world test whose W
// exceeds the visible GPUs runs oversubscribed (--oversubscribe: ranks share GPUs, NCCL's socket
// transport): verdicts are checked, timings and symmetric memory are not.
//
// One test per world and problem (World/GpuProblem.<Test>/W<w>_<stem>, W = 2, 4, 8; the problems
// are the folders discover_problems finds), so the suite runs in parts and in gtest shards
// (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX; tools/gpu_check.sh with GPU_TEST_SHARDS=N):
//   BaselineMatchesItsOracle         the baseline against its CPU double-precision oracle, tiny and small
//   BaselinePassesAsItsOwnCandidate  the baseline as its own candidate: ok, bitwise identical, plausible speedup
//   MpiLauncherGivesTheSameVerdict   that eval through mpirun (skipped where mpirun is not installed)
// One test per world (World/Gpu.<Test>/W<w>):
//   ANonDefaultDtypeEndToEnd         problem 1 in fp32 against its oracle
//   SampleOneShotAllReducePasses     the one-shot all-reduce example passes and is timed
//   ExpertsPassAtEverySizeClass      every expert solution at every size class of its problem
//   EmulatedNodesSplitTheLsaTeam...  two emulated hosts: the LSA team splits, everything still passes
//   RaggedOutputsAreChecked...       a ragged output (spec `count`): right and wrong variants of a compaction
// And once (it must run alone: it reads the GPUs' memory):
//   Adversarial.EveryCase...         every solutions/adversarial/*.cu gets the verdict its header
//                                    names, leaves no process behind, gives the GPUs' memory back,
//                                    and an honest baseline right after it times as before the suite
// gpu_test is a child subreaper: a worker orphaned by its driver is re-parented here, and "no
// worker left behind" counts this process's descendants only, so shards side by side do not see
// each other's workers.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <cctype>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "eval/system.hpp"
#include "proc/process.hpp"
#include "spec/registry.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int visible_gpus() {
  static int n = probe_system().gpu_count;
  return n;
}

struct PkbRun {
  int rc = -1;
  json record;  // the last record written
  std::vector<json> records;  // every record written
  std::string out, err;
  double seconds = 0;
};

PkbRun pkb(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  fs::path jsonl = fs::temp_directory_path() / ("pkb_gpu_test_" + std::to_string(getpid()) + ".jsonl");
  fs::remove(jsonl);
  SpawnOptions o;
  o.argv = {std::string(PKB_TEST_BINARY_DIR) + "/bin/pkb"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.argv.insert(o.argv.end(), {"--json", jsonl.string(), "--quiet"});
  o.env_set = env;
  auto r = run_command(o, std::chrono::minutes(10), 1 << 20);
  reap_exited_children();  // orphans this process adopted (main) and that have ended since
  PkbRun res;
  res.rc = r.exit.exited ? r.exit.code : -r.exit.signal;
  res.out = r.out;
  res.err = r.err;
  res.seconds = r.seconds;
  std::ifstream in(jsonl);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) {
      last = line;
      res.records.push_back(json::parse(line));
    }
  if (!last.empty()) res.record = json::parse(last);
  fs::remove(jsonl);
  std::cout << r.out << std::flush;  // the summary, for the log
  return res;
}

/// GPU memory in use on every visible GPU together (MiB, from nvidia-smi); -1 if it cannot be read.
long gpu_memory_used_mib() {
  SpawnOptions o;
  o.argv = {"nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"};
  auto r = run_command(o, std::chrono::seconds(20), 1 << 16);
  if (!r.exit.exited || r.exit.code != 0) return -1;
  long sum = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) sum += std::stol(line);
  return sum;
}

/// Waits (up to 10 s: the driver frees memory as processes exit) for GPU memory to come back to
/// `level` + slack; returns what it last read.
long wait_for_gpu_memory(long level, long slack_mib) {
  long now = gpu_memory_used_mib();
  for (int i = 0; i < 40 && now > level + slack_mib; ++i) {
    usleep(250'000);
    now = gpu_memory_used_mib();
  }
  return now;
}

/// This process's descendants whose executable is pkb-worker: a job left behind. main makes this
/// process a child subreaper, so a worker whose driver died is re-parented here and still counted;
/// the workers of another gpu_test running beside this one (a shard) are not. Reaps adopted
/// children that have exited first (no pkb run is in flight when this is called).
std::vector<int> leftover_workers() {
  reap_exited_children();
  std::vector<int> out;
  for (pid_t pid : descendants(getpid())) {
    std::error_code ec;
    auto exe = fs::read_symlink(fs::path("/proc") / std::to_string(pid) / "exe", ec);
    if (!ec && exe.filename() == "pkb-worker") out.push_back(pid);
  }
  return out;
}

/// The problem folders' stems, in id order; empty (with a message) if they cannot be read, which
/// gtest then reports as a GpuProblem suite with no instances.
std::vector<std::string> problem_stems() {
  std::vector<std::string> out;
  try {
    for (auto& p : discover_problems(fs::path(PKB_TEST_SOURCE_DIR) / "problems")) out.push_back(p.stem);
  } catch (const std::exception& e) {
    std::cerr << "gpu_test: cannot discover the problems: " << e.what() << "\n";
  }
  return out;
}

constexpr int kWorlds[] = {2, 4, 8};

/// A test at W ranks: skips without a GPU; gives the world flags, --oversubscribe where fewer
/// GPUs than W are visible.
class WorldTest : public ::testing::Test {
 protected:
  virtual int world_size() const = 0;
  void SetUp() override {
    if (visible_gpus() < 1) GTEST_SKIP() << "needs a GPU";
  }
  std::string W() const { return std::to_string(world_size()); }
  /// Fewer GPUs than W: the test runs W ranks on them (verdicts only).
  bool oversubscribed() const { return world_size() > visible_gpus(); }
  /// "--gpus W", and --oversubscribe where the GPUs are fewer than W.
  std::vector<std::string> world() const {
    std::vector<std::string> a{"--gpus", W()};
    if (oversubscribed()) a.push_back("--oversubscribe");
    return a;
  }
  /// args with the world flags inserted after the first two words (command and problem).
  std::vector<std::string> with_world(std::vector<std::string> args) const {
    auto w = world();
    args.insert(args.begin() + std::min<size_t>(2, args.size()), w.begin(), w.end());
    return args;
  }
  void expect_placement(const json& rec) const {
    EXPECT_EQ(rec["config"].value("oversubscribed", !oversubscribed()), oversubscribed());
  }
};

/// One world: World/Gpu.<Test>/W<w>.
class Gpu : public WorldTest, public ::testing::WithParamInterface<int> {
 protected:
  int world_size() const override { return GetParam(); }
};

/// One problem at one world: World/GpuProblem.<Test>/W<w>_<stem>.
struct ProblemAtWorld {
  int world = 0;
  std::string stem;
};

void PrintTo(const ProblemAtWorld& p, std::ostream* os) { *os << p.stem << " at W = " << p.world; }

std::vector<ProblemAtWorld> problems_at_worlds() {
  std::vector<ProblemAtWorld> out;
  auto stems = problem_stems();
  for (int w : kWorlds)
    for (auto& stem : stems) out.push_back({w, stem});
  return out;
}

/// "W2_1_allreduce": gtest names hold letters, digits and underscores only.
std::string param_name(const ProblemAtWorld& p) {
  std::string name = "W" + std::to_string(p.world) + "_" + p.stem;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class GpuProblem : public WorldTest, public ::testing::WithParamInterface<ProblemAtWorld> {
 protected:
  int world_size() const override { return GetParam().world; }
  const std::string& stem() const { return GetParam().stem; }
};

TEST_P(GpuProblem, BaselineMatchesItsOracle) {
  for (const char* size : {"tiny", "small"}) {
    auto r = pkb(with_world({"run", stem(), "--size", size, "--trials", "2", "--oracle"}));
    EXPECT_EQ(r.rc, 0) << stem() << " " << size << "\n" << r.out << r.err;
    EXPECT_EQ(r.record.value("status", ""), "ok") << stem() << " " << size << ": " << r.record.value("message", "");
    expect_placement(r.record);
  }
}

TEST_P(GpuProblem, BaselinePassesAsItsOwnCandidate) {
  auto r = pkb(with_world(
      {"eval", stem(), "--solution", "reference", "--size", "small", "--trials", "2", "--iters", "30", "--warmup", "20"}));
  ASSERT_EQ(r.record.value("status", ""), "ok") << stem() << ": " << r.record.value("message", "") << "\n" << r.err;
  EXPECT_EQ(r.rc, 0);
  EXPECT_TRUE(r.record["bitwise_identical"].get<bool>());
  expect_placement(r.record);
  if (oversubscribed()) {
    // Ranks share a GPU: the speedup is recorded but is not a measurement, and says so.
    EXPECT_NE(r.out.find("not a measurement"), std::string::npos);
  } else {
    double s = r.record["speedup"].get<double>();
    EXPECT_GT(s, 0.5);
    EXPECT_LT(s, 2.0);
  }
  EXPECT_EQ(r.record["timing"]["candidate"]["iters"], 30);
}

// The same evaluation through mpirun (workers join the driver over TCP): the same verdict, bitwise
// the same outputs as the baseline. Skipped where OpenMPI's mpirun is not installed.
TEST_P(GpuProblem, MpiLauncherGivesTheSameVerdict) {
  if (!find_program("mpirun")) GTEST_SKIP() << "mpirun not installed";
  auto r = pkb(with_world({"eval", stem(), "--solution", "reference", "--launcher", "mpi", "--size", "small", "--trials", "2",
                           "--iters", "20", "--warmup", "10"}));
  EXPECT_EQ(r.record.value("status", ""), "ok") << stem() << ": " << r.record.value("message", "") << "\n" << r.err;
  EXPECT_TRUE(r.record["bitwise_identical"].is_boolean() && r.record["bitwise_identical"].get<bool>());
  EXPECT_TRUE(leftover_workers().empty());
}

INSTANTIATE_TEST_SUITE_P(World, GpuProblem, ::testing::ValuesIn(problems_at_worlds()),
                         [](const auto& info) { return param_name(info.param); });

// One non-default dtype end to end.
TEST_P(Gpu, ANonDefaultDtypeEndToEnd) {
  auto r = pkb(with_world({"run", "1", "--size", "small", "--dtype", "fp32", "--oracle"}));
  EXPECT_EQ(r.record.value("status", ""), "ok") << r.record.value("message", "");
}

TEST_P(Gpu, SampleOneShotAllReducePasses) {
  std::string sample = std::string(PKB_TEST_SOURCE_DIR) + "/solutions/examples/1_allreduce_oneshot.cu";
  if (oversubscribed()) {
    // It needs symmetric memory, which ranks sharing a GPU cannot have: unsupported, exit 4, not a failure.
    auto r = pkb(with_world({"eval", "1", "--solution", sample, "--size", "tiny", "--trials", "1", "--no-perf"}));
    EXPECT_EQ(r.record.value("status", ""), "unsupported") << r.record.value("message", "") << "\n" << r.err;
    EXPECT_EQ(r.rc, 4);
    EXPECT_NE(r.record.value("message", "").find("--oversubscribe"), std::string::npos) << r.record.value("message", "");
    return;
  }
  auto r = pkb({"eval", "1", "--solution", sample, "--gpus", W()});
  ASSERT_EQ(r.record.value("status", ""), "ok") << r.record.value("message", "") << "\n" << r.err;
  EXPECT_TRUE(r.record["bitwise_identical"].get<bool>());
  EXPECT_GT(r.record["speedup"].get<double>(), 0.0);
  for (const char* d : {"fp16", "fp32"}) {
    auto rd =
        pkb({"eval", "1", "--solution", sample, "--gpus", W(), "--dtype", d, "--size", "tiny", "--trials", "2", "--no-perf"});
    EXPECT_EQ(rd.record.value("status", ""), "ok") << d << ": " << rd.record.value("message", "");
  }
}

// --profile: CUPTI records both sides of problems 1 and 12 after their timed calls; the traces are
// written, and each side's median profiled call is within 10 % of the record's timed median.
TEST_P(Gpu, ProfilesOfBothSidesAgreeWithTheTimedMedians) {
  fs::path dir = fs::temp_directory_path() / ("pkb_gpu_profile_" + std::to_string(getpid()));
  for (const char* problem : {"1", "12"}) {
    auto r = pkb(with_world({"eval", problem, "--solution", "reference", "--size", "small", "--trials", "1", "--iters", "50",
                             "--profile", dir.string()}));
    ASSERT_EQ(r.record.value("status", ""), "ok") << problem << ": " << r.record.value("message", "") << "\n" << r.err;
    EXPECT_NE(r.out.find("https://ui.perfetto.dev"), std::string::npos) << r.out;
    const json& p = r.record["profile"];
    ASSERT_TRUE(p.is_object()) << r.record.dump();
    EXPECT_TRUE(fs::exists(p.value("merged", std::string()))) << p.dump();
    for (auto& s : p["sides"]) {
      ASSERT_TRUE(s.value("collected", false)) << problem << ": profile not collected: " << s.value("reason", "");
      json trace = json::parse(std::ifstream(s["trace"].get<std::string>()));
      EXPECT_GT(trace["traceEvents"].size(), 10u);
      double timed_ms = r.record["timing"][s["label"].get<std::string>()]["median_us"].get<double>() / 1000;
      EXPECT_NEAR(s["median_call_ms"].get<double>(), timed_ms, 0.10 * timed_ms) << problem << " " << s["label"];
    }
  }
  fs::remove_all(dir);
}

// Every expert solution at every size class of its problem, checked like an eval (trials and every
// timed call), in one job per side.
TEST_P(Gpu, ExpertsPassAtEverySizeClass) {
  for (auto& e : fs::directory_iterator(fs::path(PKB_TEST_SOURCE_DIR) / "solutions" / "expert")) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".cu" || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::string problem = name.substr(0, name.find('_'));
    // Oversubscribed, the experts run their NCCL fallback (no load/store peers): the tiny class
    // checks that path; the large classes would take minutes over sockets and prove nothing more.
    auto r = pkb(with_world({"sweep", problem, "--solution", e.path().string(), "--classes", oversubscribed() ? "tiny" : "all",
                             "--trials", "2", "--iters", "10", "--warmup", "5"}));
    EXPECT_EQ(r.rc, 0) << name << "\n" << r.out << r.err;
    ASSERT_FALSE(r.records.empty()) << name;
    for (auto& rec : r.records)
      EXPECT_EQ(rec.value("status", ""), "ok") << name << " " << rec["config"]["size"] << ": " << rec.value("message", "");
  }
}

// Two emulated hosts (PKB_EMULATE_NODES: one NCCL host id per group of ranks): the LSA team splits,
// peers across the split are not load/store reachable, and every baseline and expert must still pass
// (experts fall back to NCCL for such peers).
TEST_P(Gpu, EmulatedNodesSplitTheLsaTeamAndEverythingStillPasses) {
  if (oversubscribed()) GTEST_SKIP() << "oversubscribed: every rank is its own node already";
  std::string per_node = std::to_string(GetParam() / 2);
  ::setenv("PKB_EMULATE_NODES", per_node.c_str(), 1);
  // A probe solution proves the split took effect: it fails unless its LSA team is the emulated node.
  fs::path probe = fs::temp_directory_path() / ("pkb_lsa_probe_" + std::to_string(::getpid()) + ".cu");
  std::ofstream(probe) << R"SRC(#include <pkb/solution.h>
extern "C" int pkb_init(pkb_context* ctx) {
  if (ctx->topo.gpus_per_node >= ctx->world || ctx->topo.all_pairs_p2p) {
    ctx->set_error(ctx, "the LSA team was not split");
    return 1;
  }
  return 0;
}
extern "C" int pkb_run(pkb_context* ctx, const pkb_tensor* in, int, pkb_tensor* out, int) {
  PKB_NCCL(ctx, ncclAllReduce(in[0].data, out[0].data, pkb_numel(&in[0]), pkb_nccl_dtype(in[0].dtype), ncclSum, ctx->comm, ctx->stream));
  return 0;
}
extern "C" int pkb_finalize(pkb_context*) { return 0; }
)SRC";
  auto pr = pkb({"eval", "1", "--solution", probe.string(), "--gpus", W(), "--trials", "1", "--iters", "10", "--warmup", "5"});
  EXPECT_EQ(pr.record.value("status", ""), "ok") << pr.record.value("message", "") << "\n" << pr.err;
  fs::remove(probe);
  for (auto& e : fs::directory_iterator(fs::path(PKB_TEST_SOURCE_DIR) / "solutions" / "expert")) {
    if (e.path().extension() != ".cu") continue;
    std::string name = e.path().filename().string();
    std::string id = name.substr(0, name.find('_'));
    auto r =
        pkb({"eval", id, "--solution", e.path().string(), "--gpus", W(), "--trials", "2", "--iters", "20", "--warmup", "10"});
    EXPECT_EQ(r.record.value("status", ""), "ok") << name << ": " << r.record.value("message", "") << "\n" << r.err;
  }
  ::unsetenv("PKB_EMULATE_NODES");
  EXPECT_TRUE(leftover_workers().empty());
}

// Ragged outputs (a spec's `count`): tests/gpu/problems/901_ragged_compact keeps a data-dependent number
// of rows at the front of its output and leaves the rest poisoned, which must pass as its own
// candidate. Its variants (kVariant in its reference.cu): NaN past the count passes and is bitwise
// identical where compared; a count one too many, a counted row never written, and a counted row
// with a wrong value each fail as a mismatch that names the output.
TEST_P(Gpu, RaggedOutputsAreCheckedOverTheirCountedRows) {
  const fs::path dir = fs::path(PKB_TEST_SOURCE_DIR) / "tests" / "gpu" / "problems";
  std::ifstream in(dir / "901_ragged_compact" / "reference.cu");
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string knob = "kVariant = 0;";
  ASSERT_NE(src.find(knob), std::string::npos);
  struct Variant {
    int k;
    const char* name;
    const char* status;
  };
  for (Variant v : {Variant{0, "reference", "ok"}, Variant{1, "tail_filled", "ok"}, Variant{2, "count_one_too_many", "mismatch"},
                    Variant{3, "row_skipped", "mismatch"}, Variant{4, "row_wrong", "mismatch"}}) {
    std::string solution = "reference";
    if (v.k) {
      fs::path file = fs::temp_directory_path() / ("pkb_ragged_" + std::string(v.name) + "_" + std::to_string(getpid()) + ".cu");
      std::string text = src;
      text.replace(text.find(knob), knob.size(), "kVariant = " + std::to_string(v.k) + ";");
      std::ofstream(file) << text;
      solution = file.string();
    }
    auto r = pkb(with_world({"eval", "901", "--problems-dir", dir.string(), "--solution", solution, "--dtype", "fp32", "--trials",
                             "2", "--iters", "20", "--warmup", "5"}));
    if (v.k) fs::remove(solution);
    EXPECT_EQ(r.record.value("status", ""), v.status) << v.name << ": " << r.record.value("message", "") << "\n" << r.err;
    if (std::string(v.status) == "ok") {
      EXPECT_EQ(r.rc, 0) << v.name;
      EXPECT_TRUE(r.record.value("bitwise_identical", false)) << v.name;
    } else {
      EXPECT_NE(r.record.value("message", "").find("kept'"), std::string::npos)
          << v.name << ": " << r.record.value("message", "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(World, Gpu, ::testing::ValuesIn(kWorlds),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

/// The honest baseline's timed median (us) of problem 1 at `world`, timed alone (`pkb run --perf`:
/// one job); -1 if the run did not end ok.
double honest_baseline_us(const std::vector<std::string>& world) {
  std::vector<std::string> a{"run", "1", "--perf", "--size", "small", "--trials", "1", "--iters", "200", "--warmup", "50"};
  a.insert(a.end(), world.begin(), world.end());
  auto r = pkb(a);
  if (r.record.value("status", "") != "ok") return -1;
  return r.record["timing"]["candidate"]["median_us"].get<double>();
}

/// "Does the machine still time as it did?": the honest baseline before the suite (three runs:
/// their median is the level, their range the run-to-run spread) and after each case. With one GPU
/// per rank a case may leave it at most 3 % slower; with ranks sharing a GPU (NCCL's socket
/// transport, whose times vary more from one eval to the next) at most 3 % or three times the
/// measured spread, whichever is larger. A probe past the limit is taken again and the faster one
/// counts: a transient blip passes, a process left running slows both.
class HonestProbe {
 public:
  explicit HonestProbe(std::vector<std::string> world) : world_(std::move(world)) {
    const bool shared = std::find(world_.begin(), world_.end(), "--oversubscribe") != world_.end();
    std::vector<double> t;
    for (int i = 0; i < 3; ++i) t.push_back(honest_baseline_us(world_));
    std::sort(t.begin(), t.end());
    if (t.front() <= 0) {
      ADD_FAILURE() << "the honest baseline run of problem 1 did not end ok before the suite";
      return;
    }
    level_us_ = t[1];
    double spread = (t[2] - t[0]) / level_us_;
    limit_ = shared ? std::max(0.03, 3 * spread) : 0.03;
    std::cout << "  honest baseline before the suite: " << t[0] << " / " << t[1] << " / " << t[2] << " us (spread "
              << 100 * spread << " %); each case may leave it at most " << 100 * limit_ << " % slower\n";
  }
  void expect_unslowed_after(const std::string& name) const {
    if (level_us_ <= 0) return;
    double t = honest_baseline_us(world_);
    if (t < 0 || t > level_us_ * (1 + limit_)) {
      double again = honest_baseline_us(world_);
      if (again > 0 && (t < 0 || again < t)) t = again;
    }
    EXPECT_GT(t, 0) << name << ": the honest baseline run after it did not end ok";
    EXPECT_LE(t, level_us_ * (1 + limit_)) << name << ": the honest baseline after it took " << t << " us, against " << level_us_
                                           << " us before the suite (limit +" << 100 * limit_ << " %)";
    std::cout << "  " << name << " honest baseline after: " << t << " us (" << 100 * (t / level_us_ - 1) << " %)\n";
  }

 private:
  std::vector<std::string> world_;
  double level_us_ = -1, limit_ = 0.03;
};

struct Case {
  fs::path file;
  std::string expect, problem, requires_, check;
  std::string expect_shared;  // the verdict where ranks share a GPU, if it differs
  std::string warning;  // a warning the record must carry
  std::string warning_shared;  // ... where ranks share a GPU
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  double max_speedup = 0;
};

std::vector<Case> adversarial_cases() {
  std::vector<Case> out;
  for (auto& e : fs::directory_iterator(fs::path(PKB_TEST_SOURCE_DIR) / "solutions" / "adversarial")) {
    if (e.path().extension() != ".cu") continue;
    Case c{e.path(), "", "", {}};
    std::ifstream in(e.path());
    std::string line;
    for (int i = 0; i < 8 && std::getline(in, line); ++i) {
      auto take = [&](const std::string& key) -> std::optional<std::string> {
        auto pos = line.find(key);
        if (pos == std::string::npos) return std::nullopt;
        return line.substr(pos + key.size());
      };
      if (auto v = take("pkb-expect: ")) c.expect = *v;
      if (auto v = take("pkb-expect-shared: ")) c.expect_shared = *v;
      if (auto v = take("pkb-warning: ")) c.warning = *v;
      if (auto v = take("pkb-warning-shared: ")) c.warning_shared = *v;
      if (auto v = take("pkb-problem: ")) c.problem = *v;
      if (auto v = take("pkb-requires: ")) c.requires_ = *v;
      if (auto v = take("pkb-check: ")) c.check = *v;
      if (auto v = take("pkb-max-speedup: ")) c.max_speedup = std::stod(*v);
      if (auto v = take("pkb-env: ")) {
        auto eq = v->find('=');
        if (eq != std::string::npos) c.env.emplace_back(v->substr(0, eq), v->substr(eq + 1));
      }
      if (auto v = take("pkb-args: ")) {
        std::istringstream words(*v);
        for (std::string w; words >> w;) c.args.push_back(w);
      }
    }
    if (!c.expect.empty() && !c.problem.empty()) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.file < b.file; });
  return out;
}

TEST(Adversarial, EveryCaseGetsItsVerdictAndLeavesNothingBehind) {
  if (visible_gpus() < 1) GTEST_SKIP() << "needs a GPU";
  auto cases = adversarial_cases();
  ASSERT_GE(cases.size(), 20u);
  // PKB_ADVERSARIAL_ONLY=a,b runs only the cases whose file names contain one of the words.
  if (const char* only = std::getenv("PKB_ADVERSARIAL_ONLY"); only && *only) {
    std::vector<std::string> words;
    std::stringstream ss(only);
    for (std::string w; std::getline(ss, w, ',');) words.push_back(w);
    std::erase_if(cases, [&](const Case& c) {
      return std::none_of(words.begin(), words.end(),
                          [&](const std::string& w) { return c.file.filename().string().find(w) != std::string::npos; });
    });
  }
  // Two ranks; on one GPU they share it (--oversubscribe) and the cases that need symmetric memory
  // are skipped.
  const bool shared = visible_gpus() < 2;
  std::vector<std::string> world{"--gpus", "2"};
  if (shared) world.push_back("--oversubscribe");
  auto eval_tiny = [&](const std::string& problem, const std::string& solution) {
    std::vector<std::string> a{"eval", problem, "--solution", solution};
    a.insert(a.end(), world.begin(), world.end());
    a.insert(a.end(), {"--size", "tiny"});
    return a;
  };
  // How will jobs be contained here? (Bombs are only run inside a cgroup.)
  auto base = eval_tiny("1", "reference");
  base.insert(base.end(), {"--trials", "1", "--no-perf"});
  auto probe = pkb(base);
  std::string containment = probe.record.value("containment", "process-group");
  std::cout << "  containment: " << containment << "\n";
  // Every case must give the GPUs' memory back: the level before the suite, plus a little slack.
  const long memory_level = wait_for_gpu_memory(0, 0);
  constexpr long kMemorySlackMib = 256;
  // And their time: an honest baseline eval right after each case must time as one before the
  // suite did (a process the case left running, on the GPUs or the CPUs, slows it).
  const HonestProbe honest(world);
  for (auto& c : cases) {
    if (c.requires_ == "cgroup" && containment == "process-group") {
      std::cout << "  " << c.file.filename().string() << " -> SKIPPED (needs a cgroup; this machine has none)\n";
      continue;
    }
    if (c.requires_ == "symmetric" && shared) {
      std::cout << "  " << c.file.filename().string() << " -> SKIPPED (needs symmetric memory: one GPU per rank)\n";
      continue;
    }
    std::vector<std::string> args = eval_tiny(c.problem, c.file.string());
    if (std::find(c.args.begin(), c.args.end(), "--size") != c.args.end())  // the case's size replaces tiny
      args.erase(std::find(args.begin(), args.end(), "--size"), std::find(args.begin(), args.end(), "--size") + 2);
    args.insert(args.end(), {"--trials", "2", "--iters", "20", "--warmup", "10"});
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = pkb(args, c.env);
    std::string got = r.record.value("status", "(no record)");
    const std::string& expect = shared && !c.expect_shared.empty() ? c.expect_shared : c.expect;
    EXPECT_EQ(got, expect) << c.file.filename() << ": " << r.record.value("message", "") << "\n" << r.err;
    if (expect != "ok") {
      EXPECT_NE(r.rc, 0) << c.file.filename();
    }
    for (const std::string* w : {&c.warning, shared ? &c.warning_shared : nullptr}) {
      if (!w || w->empty()) continue;
      bool found = false;
      for (auto& x : r.record.value("warnings", json::array())) found |= x.get<std::string>().find(*w) != std::string::npos;
      EXPECT_TRUE(found) << c.file.filename() << ": no warning mentions \"" << *w
                         << "\"; warnings: " << r.record.value("warnings", json::array()).dump();
    }
    if (c.max_speedup > 0 && !shared && r.record["speedup"].is_number()) {
      EXPECT_LT(r.record["speedup"].get<double>(), c.max_speedup) << c.file.filename() << ": implausible speedup";
    }
    EXPECT_LT(r.seconds, 120) << c.file.filename();
    EXPECT_TRUE(leftover_workers().empty()) << c.file.filename() << " left pkb-worker processes behind";
    if (memory_level >= 0) {
      long after = wait_for_gpu_memory(memory_level, kMemorySlackMib);
      EXPECT_LE(after, memory_level + kMemorySlackMib) << c.file.filename() << ": GPU memory did not come back (" << memory_level
                                                       << " MiB before the suite, " << after << " MiB after the case)";
      std::cout << "  " << c.file.filename().string() << " GPU memory after: " << after << " MiB (level " << memory_level
                << ")\n";
    }
    std::cout << "  " << c.file.filename().string() << " sandbox: " << r.record.value("sandbox", "?") << "\n";
    honest.expect_unslowed_after(c.file.filename().string());
    if (c.check == "report-rejects-forgery") {
      // Whatever the candidate managed to put into the results file, the report keeps only the
      // driver's signed record.
      fs::path copy = fs::temp_directory_path() / ("pkb_forgery_" + std::to_string(::getpid()) + ".jsonl");
      {
        std::ofstream out(copy);
        for (auto& j : r.records) out << j.dump() << "\n";
      }
      SpawnOptions o;
      o.argv = {std::string(PKB_TEST_BINARY_DIR) + "/bin/pkb", "report", copy.string(), "--format", "json"};
      auto rep = run_command(o, std::chrono::minutes(1), 1 << 20);
      std::cout << "  forged lines: " << r.records.size() - 1 << "; report stderr: " << rep.err;
      json summary = json::parse(rep.out);
      EXPECT_EQ(summary["rejected"].size(), r.records.size() - 1) << rep.err;
      for (auto& run : summary["runs"]) EXPECT_NE(run.value("name", ""), "forged") << "the forged record was counted";
      fs::remove(copy);
    }
    std::cout << "  " << c.file.filename().string() << " -> " << got << " in " << r.seconds << " s\n";
  }
  // A canary right after the suite: the GPUs are still fine.
  auto canary = pkb(base);
  EXPECT_EQ(canary.record.value("status", ""), "ok") << canary.record.value("message", "");
}

}  // namespace
}  // namespace pkb

// Exit 77 (CTest's skip code) when there is nothing to test here.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Orphaned descendants (a worker whose driver died) come to this process, not to init: the
  // leftover checks see them, and only them (pkb::leftover_workers).
  if (!pkb::become_child_subreaper())
    std::cerr << "gpu_test: prctl(PR_SET_CHILD_SUBREAPER) failed: a worker orphaned by its driver escapes the leftover checks\n";
  int rc = RUN_ALL_TESTS();
  if (rc == 0 && pkb::visible_gpus() < 1) return 77;
  return rc;
}
