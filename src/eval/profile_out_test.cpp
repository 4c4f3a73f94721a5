// `--profile DIR` on the driver's side: the directory is refused before anything runs when it
// cannot be used, the ranks' frames become one side's profile (or the reason there is none), and
// the files and the record's entry say what was written.
#include "eval/profile_out.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ProfileDir : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("pkb_profile_out_" + std::to_string(getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
};

/// What a rank's checker sends: two calls of 40 us, an NCCL kernel in each, pkb's barrier before.
json frame(int rank, uint64_t t0) {
  json acts = json::array(), calls = json::array();
  for (uint64_t i = 0; i < 2; ++i) {
    uint64_t t = t0 + i * 100'000;
    calls.push_back({{"start", t}, {"end", t + 40'000}});
    acts.push_back({{"kind", "kernel"},
                    {"name", "pkb::worker::barrier_delay_kernel(ncclDevComm, long long)"},
                    {"stream", 13},
                    {"start", t - 25'000},
                    {"end", t - 1'000}});
    acts.push_back({{"kind", "kernel"},
                    {"name", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"},
                    {"stream", 13},
                    {"start", t + 2'000},
                    {"end", t + 39'000}});
  }
  return {{"step", 0}, {"activity", {{"rank", rank}, {"activity", acts}, {"calls", calls}}}};
}

StepResult step_with(std::vector<json> frames) {
  StepResult sr;
  sr.profile = std::move(frames);
  return sr;
}

TEST_F(ProfileDir, AnUnusableDirectoryIsRefused) {
  EXPECT_NO_THROW(check_profile_dir((dir / "a" / "b").string()));  // created, parents too
  EXPECT_TRUE(fs::is_directory(dir / "a" / "b"));
  std::ofstream(dir / "file") << "x";
  auto refused = [](const std::string& d, const std::string& why) {
    try {
      check_profile_dir(d);
      ADD_FAILURE() << d << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused((dir / "file").string(), "not a directory");
  refused((dir / "file" / "sub").string(), "cannot create the directory");
  refused("", "--profile needs a directory");
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    refused((dir / "ro").string(), "not writable");
  }
}

TEST(ProfileOutcome, RanksFramesMakeOneSideOrSayWhyNot) {
  SideOutcome ok = side_outcome("candidate", step_with({frame(0, 1'000'000), frame(7, 1'003'000)}), 2, 1 << 20, 0);
  ASSERT_TRUE(ok.side) << ok.reason;
  ASSERT_EQ(ok.side->ranks.size(), 2u);
  EXPECT_EQ(ok.side->ranks[1].rank, 1);  // the channel's rank, not the frame's word
  EXPECT_EQ(*ok.side->algbw_bytes, double(1 << 20));
  EXPECT_FALSE(ok.side->hbm_bytes);

  json unavailable{{"step", 0}, {"error", "CUPTI cannot enable an activity kind: CUPTI_ERROR_NOT_INITIALIZED"}};
  SideOutcome no = side_outcome("baseline", step_with({frame(0, 0), unavailable}), 2, 0, 0);
  EXPECT_FALSE(no.side);
  EXPECT_EQ(no.reason, "rank 1: CUPTI cannot enable an activity kind: CUPTI_ERROR_NOT_INITIALIZED");

  json bad = frame(0, 0);
  bad["activity"]["calls"][1]["end"] = 0;
  EXPECT_NE(side_outcome("x", step_with({bad, frame(1, 0)}), 2, 0, 0).reason.find("rank 0: profile: rank 0: a call ends"),
            std::string::npos);
  EXPECT_EQ(side_outcome("x", StepResult{}, 2, 0, 0).reason, "no rank reported a profile");
}

TEST_F(ProfileDir, FilesAndTheRecordSayWhatWasWrittenAndWhatWasNot) {
  std::vector<SideOutcome> sides{side_outcome("baseline", step_with({frame(0, 5'000'000), frame(1, 5'001'000)}), 2, 1e6, 0),
                                 side_outcome("candidate", step_with({frame(0, 9'000'000), frame(1, 9'000'500)}), 2, 1e6, 0)};
  json rec = write_profiles(dir.string(), "1_allreduce", sides);
  ASSERT_EQ(rec["sides"].size(), 2u);
  for (auto& s : rec["sides"]) {
    ASSERT_TRUE(s["collected"].get<bool>()) << s;
    for (const char* f : {"trace", "summary", "activity"}) EXPECT_TRUE(fs::exists(s[f].get<std::string>())) << f;
    EXPECT_EQ(s["calls"], 2);
    EXPECT_NEAR(s["median_call_ms"].get<double>(), 0.040, 1e-12);
    EXPECT_LE(s["text"].get<std::string>().size(), kProfileTextBytes);
  }
  EXPECT_EQ(rec["sides"][0]["trace"], (dir / "1_allreduce-baseline.trace.json").string());
  EXPECT_EQ(rec["merged"], (dir / "1_allreduce.trace.json").string());
  json merged = json::parse(std::ifstream(rec["merged"].get<std::string>()));
  std::set<std::string> processes;
  for (auto& e : merged["traceEvents"])
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  EXPECT_EQ(processes.size(), 4u);  // both sides' ranks
  // The activity file reads back as the side it came from.
  json act = json::parse(std::ifstream(rec["sides"][1]["activity"].get<std::string>()));
  EXPECT_EQ(profile::to_json(profile::side_from_json(act)), profile::to_json(*sides[1].side));

  std::string lines = profile_lines(rec);
  EXPECT_NE(lines.find("https://ui.perfetto.dev"), std::string::npos) << lines;
  EXPECT_NE(lines.find("1_allreduce.trace.json"), std::string::npos) << lines;

  json partial = write_profiles(dir.string(), "12_allgather_gemm",
                                {sides[0], side_missing("candidate", "its job failed before the profile phase: boom")});
  EXPECT_FALSE(partial.contains("merged"));
  EXPECT_FALSE(partial["sides"][1]["collected"].get<bool>());
  EXPECT_NE(profile_lines(partial).find("candidate: profile not collected: its job failed before the profile phase: boom"),
            std::string::npos)
      << profile_lines(partial);
  EXPECT_EQ(profile_lines(nullptr), "");  // no --profile: nothing to say
}

}  // namespace
}  // namespace pkb
