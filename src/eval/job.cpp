#include "eval/job.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "proto/channel.hpp"

namespace pkb {

using nlohmann::json;

namespace {

enum class Cause { crash = 0, reported = 1, timeout = 2, protocol = 3 };

struct Failure {
  Cause cause;
  Status status;
  int rank;
  std::string phase, message;
  Clock::time_point when;
  int step = 0;
};

struct RankState {
  FrameDecoder dec;
  bool eof = false, done = false, errored = false, counted_exit = false, timed_out = false;
  std::string phase = "start";
  int step = 0;
  Clock::time_point phase_start;
  Clock::time_point last_idle;    // last time the channel was seen empty (nothing sent before it was read)
  Clock::time_point phase_idle;   // last_idle when the current phase was announced
  std::optional<ExitInfo> exit;
  Clock::time_point exit_seen;
};

std::chrono::milliseconds limit_for(const std::string& phase, const Deadlines& d) {
  if (phase == "start" || phase == "setup" || phase == "load") return d.setup;
  if (phase == "init") return d.init;
  if (phase.rfind("trial", 0) == 0) return d.trial;
  if (phase == "timing") return d.timing;
  if (phase == "finalize") return d.finalize;
  return d.teardown;  // "teardown"
}

class JobRunner {
 public:
  JobRunner(Launcher& l, const JobConfig& cfg) : launcher_(l), cfg_(cfg) {}

  JobResult run() {
    auto t0 = Clock::now();
    int W = static_cast<int>(cfg_.plans.size());
    job_ = launcher_.launch(cfg_.launch);
    res_.containment = job_->containment();
    ranks_.resize(W);
    res_.hello.resize(W);
    if (!cfg_.plans.empty())
      for (auto& st : cfg_.plans[0].steps) {
        StepResult sr;
        sr.trials.assign(st.trials, std::vector<RankTrial>(W));
        res_.steps.push_back(std::move(sr));
      }
    for (int r = 0; r < W; ++r) {
      ranks_[r].phase_start = ranks_[r].last_idle = ranks_[r].phase_idle = Clock::now();
      try {
        send_message(job_->channel(r), {MsgKind::plan, json(cfg_.plans[r]), {}});
      } catch (const Error& e) {
        note({Cause::crash, Status::crash, r, "start", std::string("could not send the plan: ") + e.what(), Clock::now()});
      }
    }
    loop();
    finish();
    res_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return std::move(res_);
  }

 private:
  void note(Failure f) {
    if (f.rank >= 0 && f.rank < static_cast<int>(ranks_.size())) f.step = ranks_[f.rank].step;
    if (!first_failure_) first_failure_ = f.when;
    failures_.push_back(std::move(f));
  }

  bool all_done() const {
    return std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& s) { return s.done; });
  }

  void handle(int r, Message m) {
    RankState& s = ranks_[r];
    switch (m.kind) {
      case MsgKind::hello: res_.hello[r] = m.body; break;
      case MsgKind::phase: {
        s.phase = m.body.value("phase", std::string("?"));
        s.step = m.body.value("step", 0);
        s.phase_start = Clock::now();
        s.phase_idle = s.last_idle;
        report_progress();
        break;
      }
      case MsgKind::trial: store_trial(r, std::move(m)); break;
      case MsgKind::timing: {
        StepResult& sr = step_of(m.body);
        // The driver's own clock around the timed phase, an upper bound the worker cannot move: the
        // phase was announced after the channel was last seen empty, the result arrived by now.
        m.body["driver_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - s.phase_idle).count();
        auto& into = m.body.value("mode", std::string("eager")) == "graph" ? sr.graph : sr.timing;
        if (into.empty()) into.resize(ranks_.size());
        into[r] = {std::move(m.body), std::move(m.blob)};
        break;
      }
      case MsgKind::error: {
        s.errored = true;
        auto st = parse_status(m.body.value("status", std::string("runtime_error")));
        std::string phase = m.body.value("phase", s.phase);
        if (s.done) {  // after results: a teardown problem, not the solution's failure
          res_.teardown_clean = false;
          break;
        }
        note({Cause::reported, st.value_or(Status::runtime_error), r, phase, m.body.value("message", std::string()), Clock::now()});
        break;
      }
      case MsgKind::done: s.done = true; break;
      case MsgKind::plan:
      case MsgKind::join: throw Error(Errc::protocol_error, "a worker sent an unexpected " + std::string(to_string(m.kind)) + " message");
    }
  }

  StepResult& step_of(const json& body) {
    int s = body.value("step", -1);
    if (s < 0 || s >= static_cast<int>(res_.steps.size())) throw Error(Errc::protocol_error, "step index out of range");
    return res_.steps[s];
  }

  void store_trial(int r, Message m) {
    StepResult& sr = step_of(m.body);
    const StepPlan& plan = cfg_.plans[r].steps[m.body.value("step", 0)];
    int t = m.body.value("trial", -1);
    if (t < 0 || t >= static_cast<int>(sr.trials.size())) throw Error(Errc::protocol_error, "trial index out of range");
    RankTrial rt;
    size_t off = 0;
    auto take = [&](const json& metas, std::vector<std::string>& into, const std::vector<TensorDesc>& descs) {
      if (!metas.is_array() || metas.size() != descs.size()) throw Error(Errc::protocol_error, "trial: wrong tensor count");
      for (size_t i = 0; i < descs.size(); ++i) {
        size_t n = descs[i].bytes();
        if (off + n > m.blob.size()) throw Error(Errc::protocol_error, "trial: blob too short");
        into.emplace_back(m.blob, off, n);
        off += n;
      }
    };
    take(m.body.at("outputs"), rt.outputs, plan.outputs);
    if (cfg_.plans[r].send_inputs) take(m.body.at("inputs"), rt.inputs, plan.inputs);
    if (off != m.blob.size()) throw Error(Errc::protocol_error, "trial: blob size does not match the outputs");
    rt.meta = std::move(m.body);
    sr.trials[t][r] = std::move(rt);
  }

  void report_progress() {
    // Ranks move through phases together; rank 0's phase stands for the job's.
    std::string key = std::to_string(ranks_[0].step) + ":" + ranks_[0].phase;
    if (!cfg_.on_phase || key == last_phase_) return;
    last_phase_ = key;
    cfg_.on_phase(ranks_[0].step, ranks_[0].phase);
  }

  void read_ready() {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r)
      if (!ranks_[r].eof) {
        pfds.push_back({job_->channel(r), POLLIN, 0});
        who.push_back(r);
      }
    if (pfds.empty()) {
      usleep(2000);
      return;
    }
    auto before = Clock::now();
    int n = poll(pfds.data(), pfds.size(), 20);
    if (n < 0) return;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ranks_[who[i]].last_idle = before;  // nothing was queued when poll began
        continue;
      }
      int r = who[i];
      char buf[1 << 16];
      ssize_t got = read(pfds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        ranks_[r].eof = true;
        continue;
      }
      try {
        ranks_[r].dec.feed(buf, static_cast<size_t>(got));
        while (auto m = ranks_[r].dec.next()) handle(r, std::move(*m));
      } catch (const Error& e) {
        // Stop listening to this rank; the grace period collects the rest, then the job is killed.
        ranks_[r].eof = true;
        ranks_[r].errored = true;
        note({Cause::protocol, Status::runtime_error, r, ranks_[r].phase,
              std::string("the worker broke the control protocol (") + e.what() + ")", Clock::now()});
      }
    }
  }

  void check_exits_and_deadlines() {
    auto now = Clock::now();
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      RankState& s = ranks_[r];
      if (!s.exit) {
        s.exit = job_->poll_exit(r);
        if (s.exit) s.exit_seen = now;
      }
      // Wait for the channel's end (all messages read) unless a leftover child keeps it open.
      bool drained = s.eof || now - s.exit_seen > std::chrono::milliseconds(200);
      if (!job_->exits_per_rank() && s.eof && !s.done && !s.errored && !s.counted_exit) {
        s.counted_exit = true;  // a launcher hides the rank's process: its channel closing is the evidence
        note({Cause::crash, Status::crash, r, s.phase,
              "rank " + std::to_string(r) + " disconnected during " + s.phase + " without a report (the launcher's log has its exit)", now});
      }
      if (s.exit && drained && !s.done && !s.errored && !s.counted_exit) {
        s.counted_exit = true;
        std::string how = s.exit->exited ? "exited with code " + std::to_string(s.exit->code) : "was killed by " + s.exit->describe();
        note({Cause::crash, Status::crash, r, s.phase, "rank " + std::to_string(r) + " " + how + " during " + s.phase, now});
      }
      if (!s.done && !s.errored && !s.exit && now - s.phase_start > limit_for(s.phase, cfg_.deadlines) && !s.timed_out) {
        s.timed_out = true;
        auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(limit_for(s.phase, cfg_.deadlines)).count() / 1000.0;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f", secs);
        note({Cause::timeout, Status::timeout, r, s.phase, "rank " + std::to_string(r) + " spent more than " + buf + " s in " + s.phase, now});
      }
    }
  }

  void loop() {
    while (true) {
      check_interrupted();  // the Job's destructor kills the workers on the way out
      read_ready();
      check_exits_and_deadlines();
      if (first_failure_ && Clock::now() - *first_failure_ > cfg_.deadlines.grace) break;
      if (all_done()) break;
    }
  }

  void finish() {
    if (first_failure_) {
      job_->kill();
      job_->wait_all(Clock::now() + std::chrono::seconds(10));
      // Root cause: a crash explains the errors and hangs it causes on other ranks; a reported
      // error explains hangs. Within a class the earliest wins.
      auto best = std::min_element(failures_.begin(), failures_.end(), [](const Failure& a, const Failure& b) {
        if (a.cause != b.cause) return a.cause < b.cause;
        return a.when < b.when;
      });
      res_.status = best->status;
      res_.rank = best->rank;
      res_.phase = best->phase;
      res_.step = best->step;
      res_.message = best->message;
      res_.log_tail = tail_of_file(job_->log_path(best->rank));
      return;
    }
    // All results are in; teardown is collective and has been seen to hang: bound it.
    auto deadline = Clock::now() + cfg_.deadlines.teardown;
    while (Clock::now() < deadline) {
      read_ready();
      bool all_exited = true;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        if (!ranks_[r].exit) ranks_[r].exit = job_->poll_exit(r);
        all_exited &= ranks_[r].exit.has_value();
      }
      if (all_exited) break;
    }
    bool all_exited = true;
    for (auto& s : ranks_) {
      if (!s.exit || !s.exit->exited || s.exit->code != 0) res_.teardown_clean = false;
      all_exited &= s.exit.has_value();
    }
    if (all_exited) res_.leftover_processes = job_->leftovers().size();
    for (auto& sr : res_.steps) sr.complete = true;
    job_->kill();
    job_->wait_all(Clock::now() + std::chrono::seconds(10));
  }

  Launcher& launcher_;
  const JobConfig& cfg_;
  std::unique_ptr<Job> job_;
  std::vector<RankState> ranks_;
  std::vector<Failure> failures_;
  std::optional<Clock::time_point> first_failure_;
  std::string last_phase_;
  JobResult res_;
};

}  // namespace

JobResult run_job(Launcher& launcher, const JobConfig& cfg) { return JobRunner(launcher, cfg).run(); }

}  // namespace pkb
