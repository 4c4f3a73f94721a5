// Profiles on recorded activity: the summary's figures and the Chrome trace's shape.
#include "profile/profile.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/error.hpp"

namespace pkb::profile {
namespace {

constexpr uint64_t kUs = 1000;

/// Two ranks, three calls 100 us apart. Rank 0: each call 50 us, a GEMM for its first 30 us on
/// stream 7 and NCCL's kernel from 20 to 50 us on stream 8 (10 us of it beside the GEMM), pkb's
/// barrier before the call. Rank 1: each call 55 us, NCCL only, then a copy to a peer.
SideProfile recorded() {
  SideProfile s;
  s.label = "candidate";
  s.algbw_bytes = 1e6;
  for (int r = 0; r < 2; ++r) {
    RankProfile rp;
    rp.rank = r;
    for (uint64_t i = 0; i < 3; ++i) {
      uint64_t t = 1'000'000'000 + i * 100 * kUs + (r ? 5 * kUs : 0);
      if (r == 0) {
        rp.calls.push_back({t, t + 50 * kUs});
        rp.activity.push_back({Activity::Kind::kernel, "pkb::worker::barrier_delay_kernel(ncclDevComm, long long)", 3,
                               t - 20 * kUs, t - 1 * kUs, 0});
        rp.activity.push_back({Activity::Kind::kernel, "sm90_xmma_gemm_bf16", 7, t, t + 30 * kUs, 0});
        rp.activity.push_back({Activity::Kind::kernel, "ncclDevKernel_AllGather_RING_LL", 8, t + 20 * kUs, t + 50 * kUs, 0});
      } else {
        rp.calls.push_back({t, t + 55 * kUs});
        rp.activity.push_back({Activity::Kind::kernel, "ncclDevKernel_AllGather_RING_LL", 8, t, t + 40 * kUs, 0});
        rp.activity.push_back({Activity::Kind::memcpy, "PtoP", 8, t + 40 * kUs, t + 55 * kUs, 1 << 20});
      }
    }
    s.ranks.push_back(rp);
  }
  return s;
}

TEST(Profile, SummaryCountsSharesOverlapAndBandwidth) {
  Summary s = summarize(recorded());
  EXPECT_EQ(s.calls, 3);
  EXPECT_DOUBLE_EQ(s.median_call_ms, 0.055);  // the slowest rank of each call
  ASSERT_TRUE(s.link_gbps.has_value());
  EXPECT_NEAR(*s.link_gbps, 1e6 / 0.055e6, 1e-9);
  EXPECT_FALSE(s.hbm_gbps.has_value());
  // During calls: rank 0 has 30 + 30 us, rank 1 40 + 15 us per call; the barrier lies outside.
  ASSERT_EQ(s.kernels.size(), 3u);
  EXPECT_EQ(s.kernels[0].name, "ncclDevKernel_AllGather_RING_LL");
  EXPECT_EQ(s.kernels[0].count, 6);
  EXPECT_NEAR(s.kernels[0].total_ms, 3 * 0.070, 1e-12);
  EXPECT_NEAR(s.kernels[0].share, 70.0 / 115.0, 1e-12);
  EXPECT_EQ(s.kernels[1].name, "sm90_xmma_gemm_bf16");
  EXPECT_EQ(s.kernels[2].name, "memcpy PtoP");
  double total = 0;
  for (auto& k : s.kernels) total += k.share;
  EXPECT_NEAR(total, 1.0, 1e-12);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_NEAR(s.ranks[0].call_ms, 0.150, 1e-12);
  EXPECT_NEAR(s.ranks[0].busy, 1.0, 1e-12);
  EXPECT_NEAR(s.ranks[0].communication_ms, 0.090, 1e-12);
  EXPECT_NEAR(s.ranks[0].overlap, 1.0 / 3.0, 1e-12);  // 10 of each call's 30 us of NCCL beside the GEMM
  EXPECT_EQ(s.ranks[0].harness_ms, 0);
  EXPECT_NEAR(s.ranks[1].communication_ms, 0.165, 1e-12);  // NCCL, then the peer copy: all communication
  EXPECT_EQ(s.ranks[1].overlap, 0);
  std::string text = summary_text(s, 2);
  EXPECT_NE(text.find("candidate: 3 profiled calls, median 0.0550 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("18.2 GB/s algbw"), std::string::npos) << text;
  EXPECT_NE(text.find("(1 more)"), std::string::npos) << text;  // bounded: 2 kernel lines and the rest
  EXPECT_NE(text.find("rank 0: 100.0% | 0.0900 ms |  33.3% | 0.0000 ms"), std::string::npos) << text;
  EXPECT_LT(text.size(), 1000u);
}

TEST(Profile, BarrierInsideACallIsCountedAsPkbs) {
  SideProfile s = recorded();
  auto& a = s.ranks[0].activity[0];  // move the first barrier into the first call
  a.start_ns += 25 * kUs;
  a.end_ns += 25 * kUs;
  EXPECT_NEAR(summarize(s).ranks[0].harness_ms, 0.019, 1e-12);
}

/// The Chrome trace event format's rules that viewers rely on: every event has name, ph, ts, pid
/// and tid; a complete event ('X') has dur; a metadata event ('M') has args.
void expect_valid_chrome_trace(const nlohmann::json& t) {
  ASSERT_TRUE(t.is_object());
  ASSERT_TRUE(t.at("traceEvents").is_array());
  for (auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.at("name").is_string()) << e;
    std::string ph = e.at("ph").get<std::string>();
    ASSERT_TRUE(ph == "X" || ph == "M") << e;
    ASSERT_TRUE(e.at("pid").is_number_integer() && e.at("tid").is_number_integer()) << e;
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e;  // required of every event
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e;
      EXPECT_GE(e["dur"].get<double>(), 0) << e;
    } else {
      ASSERT_TRUE(e.at("args").is_object()) << e;
    }
  }
}

/// The process names a trace declares ("candidate rank 1", ...).
std::set<std::string> process_names(const nlohmann::json& t) {
  std::set<std::string> names;
  for (auto& e : t["traceEvents"])
    if (e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
  return names;
}

TEST(Profile, ChromeTraceHasEveryRankOfEverySideAsAProcessOnOneClockPerSide) {
  SideProfile base = recorded();
  base.label = "baseline";
  SideProfile cand = recorded();
  for (auto& r : cand.ranks) {  // profiled a second later: each side still starts at 0
    for (auto& c : r.calls) c.start_ns += 1'000'000'000, c.end_ns += 1'000'000'000;
    for (auto& a : r.activity) a.start_ns += 1'000'000'000, a.end_ns += 1'000'000'000;
  }
  nlohmann::json t = chrome_trace({base, cand});
  expect_valid_chrome_trace(t);
  double first_call[2] = {1e18, 1e18};
  int streams = 0;
  for (auto& e : t["traceEvents"]) {
    if (e["name"] == "thread_name" && e["args"]["name"].get<std::string>().rfind("stream", 0) == 0) streams++;
    if (e.value("cat", "") == "call") {
      int side = e["pid"].get<int>() / 1000;
      first_call[side] = std::min(first_call[side], e["ts"].get<double>());
    }
  }
  EXPECT_EQ(process_names(t),
            (std::set<std::string>{"baseline rank 0", "baseline rank 1", "candidate rank 0", "candidate rank 1"}));
  EXPECT_EQ(first_call[0], 0);
  EXPECT_EQ(first_call[1], 0);
  EXPECT_EQ(streams, 2 * (3 + 1));  // rank 0: streams 3, 7, 8; rank 1: stream 8; per side
  // The text is JSON a viewer can load: it parses back to the same events.
  EXPECT_EQ(nlohmann::json::parse(t.dump()), t);
}

TEST(Profile, ActivityRoundTripsAndMalformedActivityIsNamed) {
  SideProfile s = recorded();
  SideProfile back = side_from_json(to_json(s));
  EXPECT_EQ(to_json(back), to_json(s));
  nlohmann::json bad = to_json(s);
  bad["ranks"][0]["activity"][0]["kind"] = "graph";
  try {
    side_from_json(bad);
    ADD_FAILURE() << "an unknown kind was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown activity kind 'graph'"), std::string::npos) << e.what();
  }
  // Records a rank had to leave out travel with it and are said in the summary.
  EXPECT_EQ(summary_text(summarize(s)).find("left out"), std::string::npos);
  s.ranks[1].dropped = 12;
  back = side_from_json(to_json(s));
  EXPECT_EQ(back.ranks[1].dropped, 12u);
  EXPECT_EQ(summarize(back).dropped, 12u);
  EXPECT_NE(summary_text(summarize(back)).find("12 activity records past the per-rank limit were left out"), std::string::npos);
  bad = to_json(s);
  bad["ranks"][1]["activity"][0]["end"] = 0;
  EXPECT_THROW(side_from_json(bad), Error);
  bad = to_json(s);
  bad["ranks"][0].erase("calls");
  EXPECT_THROW(side_from_json(bad), Error);
}

/// Activity CUPTI recorded on one H100 (2026-12-07, two ranks sharing it, so NCCL's socket
/// transport): `pkb eval 12 --solution solutions/expert/12_allgather_gemm.cu --gpus 2 --oversubscribe
/// --size small --trials 1 --iters 50 --profile DIR`, both sides' DIR/*.activity.json. That eval's
/// record timed the calls at medians of 2.5096 ms (baseline) and 2.5230 ms (expert).
SideProfile recorded_on_gpu(const std::string& file) {
  const char* src = std::getenv("PKB_SOURCE_DIR");
  if (!src) throw std::runtime_error("PKB_SOURCE_DIR is not set (ctest sets it)");
  std::ifstream in(std::string(src) + "/src/profile/testdata/" + file);
  if (!in) throw std::runtime_error("cannot read testdata " + file);
  return side_from_json(nlohmann::json::parse(in));
}

TEST(Profile, ActivityRecordedOnAGpuSummarisesToTheTimedMediansAndLoadsAsATrace) {
  SideProfile base = recorded_on_gpu("h100-12-reference.activity.json");
  SideProfile cand = recorded_on_gpu("h100-12-expert.activity.json");
  const double timed_ms[2] = {2.5096, 2.5230};
  int i = 0;
  for (const SideProfile* s : {&base, &cand}) {
    Summary sum = summarize(*s);
    EXPECT_EQ(sum.calls, 5) << s->label;
    EXPECT_NEAR(sum.median_call_ms, timed_ms[i], 0.10 * timed_ms[i]) << s->label;  // the 10 %
    ASSERT_FALSE(sum.kernels.empty());
    EXPECT_EQ(sum.kernels[0].name.rfind("ncclDevKernel_AllGather", 0), 0u) << sum.kernels[0].name;  // ranks share a GPU
    EXPECT_EQ(sum.ranks.size(), 2u);
    for (auto& r : sum.ranks) EXPECT_EQ(r.harness_ms, 0) << "pkb's barrier ran inside a call on rank " << r.rank;
    ++i;
  }
  nlohmann::json t = chrome_trace({base, cand});
  expect_valid_chrome_trace(t);
  EXPECT_EQ(process_names(t),
            (std::set<std::string>{"baseline rank 0", "baseline rank 1", "candidate rank 0", "candidate rank 1"}));
}

// The runner's marks give the calls: two per call, in time order whatever order CUPTI delivered
// them in, and a count that is not 2 per call is an error that says how many there were.
TEST(Profile, CallsLieBetweenTheirMarks) {
  const std::string mark = "pkb::worker::(anonymous namespace)::profile_mark_kernel()";
  std::vector<Activity> a = {
      {Activity::Kind::kernel, mark, 7, 300, 302, 0},  // after call 1
      {Activity::Kind::kernel, "gemm", 7, 110, 180, 0},  {Activity::Kind::kernel, mark, 7, 100, 104, 0},  // before call 0
      {Activity::Kind::memcpy, "PtoP", 7, 190, 195, 64}, {Activity::Kind::kernel, mark, 7, 200, 201, 0},  // after call 0
      {Activity::Kind::kernel, mark, 7, 250, 252, 0},  // before call 1
  };
  std::vector<Call> calls = calls_between_marks(a, 2, "profile_mark_kernel");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].start_ns, 104u);
  EXPECT_EQ(calls[0].end_ns, 200u);
  EXPECT_EQ(calls[1].start_ns, 252u);
  EXPECT_EQ(calls[1].end_ns, 300u);
  EXPECT_TRUE(is_harness(a[0])) << "the marks are pkb's, not the solution's compute";
  try {
    calls_between_marks(a, 3, "profile_mark_kernel");
    ADD_FAILURE() << "4 marks were taken for 3 calls";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 of the 6 marks"), std::string::npos) << e.what();
  }
  a.pop_back();
  EXPECT_THROW(calls_between_marks(a, 2, "profile_mark_kernel"), Error);
  // Two marks that overlap (a stream that is not the call's, or clocks gone wrong) give no call.
  std::vector<Activity> overlapping = {{Activity::Kind::kernel, mark, 7, 100, 160, 0},
                                       {Activity::Kind::kernel, mark, 9, 150, 170, 0}};
  try {
    calls_between_marks(overlapping, 1, "profile_mark_kernel");
    ADD_FAILURE() << "overlapping marks were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pkb::profile
