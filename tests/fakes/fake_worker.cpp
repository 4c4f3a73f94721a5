// A CPU-only stand-in for pkb-worker that speaks the control protocol, for testing the launcher and
// the job runner without GPUs. PKB_FAKE_MODE picks a behaviour:
//   ok                      every phase, trials and timing as a real worker would report them
//   hang:R:PHASE            rank R stops answering on entering PHASE (e.g. "trial 0")
//   crash:R:PHASE           rank R aborts (SIGABRT) on entering PHASE
//   exit:R:PHASE            rank R exits with code 0 on entering PHASE, without a word
//   error:R:PHASE           rank R reports a runtime_error on entering PHASE and exits 1
//   garbage:R:PHASE         rank R writes bytes that are not a frame
//   daemon:R:PHASE          rank R forks a child that keeps the channel open, then exits
//   linger:R:PHASE          rank R forks a child that sleeps on, then carries on normally
//   reannounce:R:PHASE      rank R announces PHASE again every 200 ms and never moves on (a
//                           "heartbeat" that must not extend any deadline)
//   badframe:R:PHASE        rank R sends a well-formed trial frame without its "outputs" key
//   earlytrial:R:PHASE      rank R sends the results of trial 1 while announcing PHASE
//   slow:R:                 rank R spends 700 ms in every phase (each within its limit)
//   nosamples               every rank reports its timed calls with no sampled values (nothing checked)
//   nocupti:R               rank R's profile frame (a plan with profile_calls) says CUPTI refused
//   nocommit                every rank sends its timing report without committing the calls one by one
//   shorttimes              every rank's final report halves the call times it committed
//   twice                   every rank commits timed call 0 twice
//   skipahead:R:PHASE       rank R announces finalize and says done on entering PHASE, without results
//   probe:R:PHASE           rank R reports (as a runtime_error) its uid, NoNewPrivs, what came of
//                           appending to $PKB_FAKE_VICTIM and of moving itself to the root cgroup,
//                           the network interfaces it sees, and whether it reaches 127.0.0.1:$PKB_FAKE_PORT
// Other ranks of a failing job wait forever, as real peers stuck in a collective would.
// PKB_FAKE_PIDS=DIR makes every process (and forked child) write its pid to DIR/<pid>.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "core/digest.hpp"
#include "core/dtype.hpp"
#include "core/philox.hpp"
#include "launch/launch_env.hpp"
#include "proc/netns.hpp"
#include "proto/channel.hpp"
#include "proto/plan.hpp"

namespace {

using nlohmann::json;

struct Mode {
  std::string kind = "ok", phase;
  int rank = -1;
};

Mode parse_mode() {
  Mode m;
  const char* e = std::getenv("PKB_FAKE_MODE");
  if (!e || !*e) return m;
  std::string s(e);
  auto a = s.find(':');
  if (a == std::string::npos) {
    m.kind = s;
    return m;
  }
  auto b = s.find(':', a + 1);
  m.kind = s.substr(0, a);
  m.rank = std::stoi(s.substr(a + 1, b - a - 1));
  m.phase = b == std::string::npos ? "" : s.substr(b + 1);
  return m;
}

void note_pid() {
  if (const char* d = std::getenv("PKB_FAKE_PIDS")) std::ofstream(std::string(d) + "/" + std::to_string(getpid())) << getpid();
}

[[noreturn]] void hang() {
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1, rank = -1;
  std::string connect, secret;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--control-fd") fd = std::atoi(argv[i + 1]);
    if (k == "--rank") rank = std::atoi(argv[i + 1]);
    if (k == "--connect") connect = argv[i + 1];
    if (k == "--secret") secret = argv[i + 1];
  }
  if (!connect.empty()) {  // started by a job launcher: rank from its environment, channel over TCP
    auto env = pkb::launch_env();
    if (!env) return 3;
    rank = env->rank;
    fd = pkb::join_job(connect, secret, *env);
  }
  note_pid();
  Mode mode = parse_mode();
  auto m = pkb::recv_message(fd);
  if (!m) return 3;
  pkb::WorkerPlan plan = m->body.get<pkb::WorkerPlan>();
  auto send = [&](pkb::MsgKind k, json body, std::string blob = {}) {
    pkb::send_message(fd, {k, std::move(body), std::move(blob)});
  };
  send(pkb::MsgKind::hello, {{"rank", rank}, {"gpu", "fake"}});
  int step_index = 0;
  auto enter = [&](const std::string& phase) {
    send(pkb::MsgKind::phase, {{"phase", phase}, {"step", step_index}});  // as a real worker: announce, then work
    if (mode.kind == "slow" && mode.rank == rank) std::this_thread::sleep_for(std::chrono::milliseconds(700));
    if (mode.rank == rank && mode.phase == phase) {
      if (mode.kind == "hang") hang();
      if (mode.kind == "crash") std::abort();
      if (mode.kind == "exit") _exit(0);
      if (mode.kind == "error") {
        send(pkb::MsgKind::error, {{"status", "runtime_error"}, {"phase", phase}, {"message", "fake failure on purpose"}});
        _exit(1);
      }
      if (mode.kind == "probe") {
        std::string facts = "uid=" + std::to_string(getuid());
        std::ifstream st("/proc/self/status");
        for (std::string line; std::getline(st, line);)
          if (line.rfind("NoNewPrivs:", 0) == 0) facts += " nnp=" + line.substr(line.find_last_of(" \t") + 1);
        auto attempt = [](const char* path, const char* text) {
          if (!path || !*path) return std::string("none");
          FILE* f = std::fopen(path, "a");
          if (!f) return std::string(std::strerror(errno));
          bool ok = std::fputs(text, f) >= 0;
          ok &= std::fclose(f) == 0;
          return std::string(ok ? "written" : std::strerror(errno));
        };
        facts += " victim=" + attempt(std::getenv("PKB_FAKE_VICTIM"), "forged line\n");
        facts += " cgroup=" + attempt("/sys/fs/cgroup/cgroup.procs", std::to_string(getpid()).c_str());
        std::string net;  // the interfaces it sees, and whether it reaches the driver's TCP port
        for (auto& name : pkb::network_interfaces()) net += (net.empty() ? "" : ",") + name;
        facts += " net=" + net;
        if (const char* port = std::getenv("PKB_FAKE_PORT")) {
          int s = ::socket(AF_INET, SOCK_STREAM, 0);
          sockaddr_in a{};
          a.sin_family = AF_INET;
          a.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
          a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
          facts += std::string(" tcp=") + (ok ? "connected" : std::strerror(errno));
          close(s);
        }
        send(pkb::MsgKind::error, {{"status", "runtime_error"}, {"phase", phase}, {"message", facts}});
        _exit(1);
      }
      if (mode.kind == "skipahead") {
        send(pkb::MsgKind::phase, {{"phase", "finalize"}, {"step", step_index}});
        send(pkb::MsgKind::done, json::object());
        hang();
      }
      if (mode.kind == "reannounce")
        while (true) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          send(pkb::MsgKind::phase, {{"phase", phase}, {"step", step_index}});
        }
      if (mode.kind == "badframe") {
        send(pkb::MsgKind::trial, {{"step", step_index}, {"trial", 0}, {"inputs", json::array()}});
        hang();
      }
      if (mode.kind == "earlytrial") {
        send(pkb::MsgKind::trial, {{"step", step_index}, {"trial", 1}, {"outputs", json::array()}, {"inputs", json::array()}});
        hang();
      }
      if (mode.kind == "garbage") {
        (void)!write(fd, "this is not a frame at all, not even close!!", 44);
        hang();
      }
      if (mode.kind == "linger") {
        if (fork() == 0) {
          note_pid();
          close(fd);
          hang();
        }
        return;
      }
      if (mode.kind == "daemon") {
        if (fork() == 0) {
          setsid();
          note_pid();
          hang();
        }
        _exit(0);
      }
    }
    if (mode.kind != "ok" && mode.kind != "linger" && mode.rank != rank && mode.phase == phase) hang();  // peers get stuck too
  };
  for (auto p : {"setup", "load"}) enter(p);
  for (size_t si = 0; si < plan.steps.size(); ++si) {
    const pkb::StepPlan& step = plan.steps[si];
    step_index = static_cast<int>(si);
    enter("init");
    for (int t = 0; t < step.trials; ++t) {
      enter("trial " + std::to_string(t));
      json outs = json::array(), ins = json::array();
      std::string blob;
      for (size_t o = 0; o < step.outputs.size(); ++o) {
        auto& d = step.outputs[o];
        std::string bytes(d.bytes(), '\0');
        // Output = values regenerated on the host from the step's seed (a deterministic "solution").
        pkb::Dist dist;
        for (size_t i = 0; i < d.numel(); ++i)
          pkb::generate_element(bytes.data(), d.dtype, dist, pkb::input_key(step.trial_seeds.at(t), t, rank, 0, dist), i);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(pkb::digest_bytes(bytes.data(), bytes.size())));
        outs.push_back({{"name", d.name},
                        {"digest_return", hex},
                        {"digest_after", hex},
                        {"unwritten", 0},
                        {"nonfinite", 0},
                        {"poison", "7fc0"}});
        blob += bytes;
      }
      for (auto& d : step.inputs) ins.push_back({{"name", d.name}, {"digest_before", "0"}, {"digest_after", "0"}});
      send(pkb::MsgKind::trial, {{"step", step_index}, {"trial", t}, {"outputs", outs}, {"inputs", ins}}, blob);
    }
    if (step.timing.enabled) {
      enter("timing");
      const double time_ms = 0.010 + 0.001 * rank;
      // Commit each call and take the driver's grant, as a real worker does; whole outputs of the
      // calls the grants mark as fully checked follow the samples in the report.
      size_t full_calls = 0;
      for (int c = -1; c < step.timing.iters && mode.kind != "nocommit"; ++c) {
        json outs = json::array();
        for (size_t o = 0; o < step.outputs.size(); ++o) outs.push_back({{"digest", "0"}, {"unwritten", 0}, {"nonfinite", 0}});
        json body{{"step", step_index}, {"call", c}};
        if (c >= 0) body.update(json{{"time_ms", time_ms}, {"outputs", outs}});
        send(pkb::MsgKind::call, body);
        if (mode.kind == "twice" && c == 0) send(pkb::MsgKind::call, body);
        auto g = pkb::recv_message(fd);
        if (!g || g->kind != pkb::MsgKind::grant || g->body.value("call", -2) != c) hang();
        full_calls += g->body.value("full", false);
      }
      json times = json::array();
      for (int i = 0; i < step.timing.iters; ++i) times.push_back(mode.kind == "shorttimes" ? time_ms / 2 : time_ms);
      json outs = json::array();
      std::string samples, full;
      for (size_t o = 0; o < step.outputs.size(); ++o) {
        auto& d = step.outputs[o];
        // As many sampled values as the plan asks for (PKB_FAKE_MODE=nosamples: none, a cheat).
        size_t k =
            mode.kind == "nosamples" ? 0 : std::min<size_t>(static_cast<size_t>(step.timing.samples_per_output), d.numel());
        samples.append(k * pkb::dtype_size(d.dtype) * static_cast<size_t>(step.timing.iters), '\0');
        full.append(d.bytes() * full_calls, '\0');
        outs.push_back({{"name", d.name},
                        {"digests", json(std::vector<std::string>(step.timing.iters, "0"))},
                        {"unwritten", json(std::vector<int>(step.timing.iters, 0))},
                        {"nonfinite", json(std::vector<int>(step.timing.iters, 0))},
                        {"samples", k}});
      }
      send(pkb::MsgKind::timing,
           {{"step", step_index},
            {"mode", "eager"},
            {"checked", true},
            {"warmup", 3},
            {"iters", step.timing.iters},
            {"groups", 2},
            {"times_ms", times},
            {"span_ms", 0.02 * step.timing.iters},
            {"host_ms", 0.03 * step.timing.iters},
            {"outputs", outs},
            {"inputs", json::array()}},
           samples + full);
    }
    if (step.profile_calls > 0) {  // --profile: one call of 40 us with one kernel, or CUPTI refused
      enter("profile");
      uint64_t t = 1'000'000'000ull + 1000ull * static_cast<uint64_t>(rank);
      json act{
          {"rank", rank},
          {"calls", {{{"start", t}, {"end", t + 40'000}}}},
          {"activity", {{{"kind", "kernel"}, {"name", "ncclDevKernel_fake"}, {"stream", 7}, {"start", t}, {"end", t + 39'000}}}}};
      if (mode.kind == "nocupti" && mode.rank == rank)
        send(pkb::MsgKind::profile, {{"step", step_index}, {"error", "CUPTI cannot enable an activity kind: fake"}});
      else send(pkb::MsgKind::profile, {{"step", step_index}, {"activity", act}});
    }
    enter("finalize");
  }
  send(pkb::MsgKind::done, json::object());
  enter("teardown");
  return 0;
}
