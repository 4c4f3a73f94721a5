#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

TEST(Channel, PassesDescriptorsBetweenMessages) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  send_message(sv[0], {MsgKind::op, {{"op", "sets"}}, {}});
  send_fds(sv[0], {pipe_fds[1]});
  send_message(sv[0], {MsgKind::op, {{"op", "next"}}, {}});
  auto m = recv_message(sv[1]);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body["op"], "sets");
  std::vector<int> got = recv_fds(sv[1], 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(write(got[0], "x", 1), 1);  // the received descriptor is the pipe's write end
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  auto n = recv_message(sv[1]);  // the message after the descriptors is intact
  ASSERT_TRUE(n);
  EXPECT_EQ(n->body["op"], "next");
  // Asking for descriptors where a plain message follows is a protocol error, not a hang.
  send_message(sv[0], {MsgKind::op, {{"op", "x"}}, {}});
  EXPECT_THROW(recv_fds(sv[1], 1), Error);
  for (int fd : {sv[0], sv[1], pipe_fds[0], pipe_fds[1], got[0]}) close(fd);
}

TEST(Channel, WaitEndsWhenTheChildExitsThoughAGrandchildHoldsTheSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(sv[0]);
    if (fork() == 0) {  // the grandchild keeps the socket open, silently, for a while
      sleep(5);
      _exit(0);
    }
    _exit(7);
  }
  close(sv[1]);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  if (pidfd < 0) GTEST_SKIP() << "no pidfd_open on this kernel";
  EXPECT_FALSE(wait_readable_or_exit(sv[0], pidfd));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 7);
  // Data waiting on the socket wins over the exit.
  int sv2[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
  ASSERT_EQ(write(sv2[1], "x", 1), 1);
  EXPECT_TRUE(wait_readable_or_exit(sv2[0], -1));
  for (int fd : {sv[0], sv2[0], sv2[1], pidfd}) close(fd);
}

TEST(Plan, TheRunnersPlanHoldsNoSeedAndNoCheckSettings) {
  WorkerPlan p;
  p.nccl_id_hex = std::string(256, 'a');
  p.send_inputs = true;
  StepPlan st;
  st.inputs.push_back({"x", DType::fp32, {4}, Dist{DistKind::normal, 0, 1, 0, 0}, true});
  st.outputs.push_back({"y", DType::fp32, {4}, {}});
  st.seed = 0x1234567890abcdefull;
  st.trials = 3;
  st.timing.enabled = true;
  st.timing.samples_per_output = 256;
  st.timing.full_checks = 2;
  p.steps = {st};
  WorkerPlan w = seal_for_worker(p);
  WorkerPlan r = seal_for_runner(w);
  std::string text = nlohmann::json(r).dump();
  for (uint64_t secret : w.steps[0].trial_seeds) EXPECT_EQ(text.find(std::to_string(secret)), std::string::npos);
  EXPECT_EQ(text.find(std::to_string(w.steps[0].warmup_seed)), std::string::npos);
  EXPECT_EQ(text.find(std::to_string(p.steps[0].seed)), std::string::npos);
  EXPECT_EQ(r.steps[0].trial_seeds.size(), 3u);  // how many trials, but not their seeds
  EXPECT_EQ(r.steps[0].timing.samples_per_output, 0);
  EXPECT_EQ(r.steps[0].timing.full_checks, 0);
  EXPECT_FALSE(r.send_inputs);
  WorkerPlan q = nlohmann::json(r).get<WorkerPlan>();
  EXPECT_TRUE(q.steps[0].inputs[0].writable);  // inputs modified in place stay writable there
}

TEST(Plan, TheConfinementReachesTheRunnerAndIsOffWhenAbsent) {
  WorkerPlan p;
  p.nccl_id_hex = std::string(256, 'a');
  p.confine = {true, {"/root/.cache/pkb"}, {"/dev", "/proc"}};
  WorkerPlan r = nlohmann::json(seal_for_runner(seal_for_worker(p))).get<WorkerPlan>();
  EXPECT_TRUE(r.confine.enabled);
  EXPECT_EQ(r.confine.hidden, (std::vector<std::string>{"/root/.cache/pkb"}));
  EXPECT_EQ(r.confine.writable, (std::vector<std::string>{"/dev", "/proc"}));
  p.confine = {};
  EXPECT_FALSE(nlohmann::json(p).contains("confine"));
  EXPECT_FALSE(nlohmann::json(p).get<WorkerPlan>().confine.enabled);
}

TEST(Plan, OnlyAProfiledJobAsksForAProfile) {
  WorkerPlan p;
  p.nccl_id_hex = std::string(256, 'a');
  p.steps = {StepPlan{}};
  std::string text = nlohmann::json(seal_for_runner(seal_for_worker(p))).dump();
  EXPECT_EQ(text.find("profile"), std::string::npos) << text;  // no --profile: the plan says nothing of it
  EXPECT_EQ(nlohmann::json(p).get<WorkerPlan>().steps[0].profile_calls, 0);
  p.steps[0].profile_calls = 5;
  WorkerPlan r = nlohmann::json(seal_for_runner(seal_for_worker(p))).get<WorkerPlan>();
  EXPECT_EQ(r.steps[0].profile_calls, 5);
  nlohmann::json bad = p;
  bad["steps"][0]["profile_calls"] = kMaxProfileCalls + 1;
  EXPECT_THROW(bad.get<WorkerPlan>(), Error);
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
