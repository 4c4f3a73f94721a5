#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/error.hpp"
#include "proto/channel.hpp"
#include "proto/plan.hpp"

namespace pkb {
namespace {

TEST(Channel, RoundTripOverSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string big(3 << 20, 'x');
  big[12345] = 'y';
  std::thread t([&] {
    send_message(sv[0], {MsgKind::phase, {{"phase", "trial 0"}}, {}});
    send_message(sv[0], {MsgKind::trial, {{"trial", 0}}, big});
    close(sv[0]);
  });
  auto a = recv_message(sv[1]);
  auto b = recv_message(sv[1]);
  auto c = recv_message(sv[1]);
  t.join();
  close(sv[1]);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(c);  // clean end of stream
  EXPECT_EQ(a->kind, MsgKind::phase);
  EXPECT_EQ(a->body["phase"], "trial 0");
  EXPECT_EQ(b->blob, big);
}

TEST(Channel, DecoderHandlesByteByByteAndRejectsGarbage) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  send_message(sv[0], {MsgKind::done, {{"k", 1}}, "blob"});
  send_message(sv[0], {MsgKind::hello, {{"k", 2}}, ""});
  close(sv[0]);
  std::string all;
  char buf[256];
  ssize_t n;
  while ((n = read(sv[1], buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  close(sv[1]);
  FrameDecoder d;
  std::vector<Message> got;
  for (char ch : all) {
    d.feed(&ch, 1);
    while (auto m = d.next()) got.push_back(*m);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].blob, "blob");
  EXPECT_EQ(got[1].body["k"], 2);
  FrameDecoder bad;
  std::string junk(64, 'z');
  bad.feed(junk.data(), junk.size());
  EXPECT_THROW(bad.next(), Error);
}

TEST(Plan, JsonRoundTrip) {
  WorkerPlan p;
  p.role = "candidate";
  p.problem = "1_allreduce";
  p.world = 4;
  p.rank = 2;
  p.device = 2;
  p.dtype = DType::fp16;
  p.so_path = "/tmp/x.so";
  p.nccl_id_hex = std::string(256, 'a');
  p.groups.push_back({"tp", 1, 2, {2, 3}});
  StepPlan st;
  st.name = "tiny";
  st.inputs.push_back({"tensor", DType::fp16, {4, 8}, Dist{DistKind::grid, 0.0625, 1, -32, 32}});
  st.outputs.push_back({"out", DType::fp16, {4, 8}, {}});
  st.params = {{"M", 4}, {"N", 8}};
  st.float_params = {{"lr", 1e-3}};
  st.trial_params = {{"step", 1, 7}};
  st.inputs[0].dist.share_group = 3;
  st.seed = 0xdeadbeefcafef00dull;
  st.trials = 3;
  st.timing.enabled = true;
  st.timing.graph = true;
  st.timing.iters = 17;
  p.steps = {st, st};
  p.steps[1].name = "large";
  p = seal_for_worker(p);
  EXPECT_EQ(p.steps[0].trial_seeds.size(), 3u);
  WorkerPlan q = nlohmann::json(p).get<WorkerPlan>();
  EXPECT_EQ(nlohmann::json(q), nlohmann::json(p));
  ASSERT_EQ(q.steps.size(), 2u);
  EXPECT_EQ(q.steps[0].inputs[0].dist.lo, -32);
  EXPECT_EQ(q.groups[0].members, (std::vector<int>{2, 3}));
  EXPECT_EQ(q.steps[1].seed, 0u);  // the step's seed never leaves the driver
  EXPECT_TRUE(q.steps[1].timing.graph);
  EXPECT_EQ(q.steps[1].name, "large");
  EXPECT_EQ(q.steps[0].inputs[0].dist.share_group, 3);
  ASSERT_EQ(q.steps[0].float_params.size(), 1u);
  EXPECT_EQ(q.steps[0].float_params[0].second, 1e-3);
  ASSERT_EQ(q.steps[0].trial_params.size(), 1u);
  EXPECT_EQ(q.steps[0].trial_params[0].high, 7);
  nlohmann::json old = nlohmann::json(p.steps[0]);  // a plan without the new keys still reads
  old.erase("float_params");
  old.erase("trial_params");
  old["inputs"][0]["dist"].erase("share_group");
  StepPlan o = old.get<StepPlan>();
  EXPECT_TRUE(o.float_params.empty() && o.trial_params.empty());
  EXPECT_EQ(o.inputs[0].dist.share_group, -1);
}

TEST(Plan, SamplePositionsAreDeterministicAndInRange) {
  auto a = sample_positions(1, 0, 0, 1000, 64), b = sample_positions(1, 0, 0, 1000, 64);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 64u);
  for (auto x : a) EXPECT_LT(x, 1000u);
  EXPECT_NE(a, sample_positions(1, 1, 0, 1000, 64));
  EXPECT_EQ(sample_positions(1, 0, 0, 10, 64).size(), 10u);
}

}  // namespace
}  // namespace pkb
