#include "eval/job.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
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

/// The phases a worker announces, in the only order it may: setup, load, then per step init, each
/// trial, timing (when enabled), profile (with --profile), finalize; teardown last (at the last step's index).
struct PhaseKey {
  int step = 0;
  Phase phase;
  bool operator==(const PhaseKey&) const = default;
};

std::vector<PhaseKey> phase_sequence(const WorkerPlan& plan) {
  using K = Phase::Kind;
  std::vector<PhaseKey> seq{{0, {K::start}}, {0, {K::setup}}, {0, {K::load}}};
  int s = 0;
  for (; s < static_cast<int>(plan.steps.size()); ++s) {
    seq.push_back({s, {K::init}});
    for (int t = 0; t < plan.steps[s].trials; ++t) seq.push_back({s, {K::trial, t}});
    if (plan.steps[s].timing.enabled) seq.push_back({s, {K::timing}});
    if (plan.steps[s].profile_calls > 0) seq.push_back({s, {K::profile}});
    seq.push_back({s, {K::finalize}});
  }
  seq.push_back({std::max(0, s - 1), {K::teardown}});
  return seq;
}

/// A frame pkb cannot accept from a worker: the worker's fault (protocol_error), never pkb's.
[[noreturn]] void violation(const std::string& what) { throw Error(Errc::protocol_error, what); }

void require(bool ok, const std::string& what) {
  if (!ok) violation(what);
}

bool is_count(const json& x) { return x.is_number_unsigned() || (x.is_number_integer() && x.get<long long>() >= 0); }

bool is_count_array(const json& j, size_t n) {
  return j.is_array() && j.size() == n && std::all_of(j.begin(), j.end(), is_count);
}

/// The trial frame's metadata: everything the checks read, with the types they read it as.
void validate_trial_meta(const json& b, const StepPlan& plan, bool with_inputs) {
  const json& outs = b.at("outputs");
  require(outs.is_array() && outs.size() == plan.outputs.size(), "trial: wrong output count");
  for (auto& o : outs)
    for (const char* k : {"digest_return", "digest_after", "poison"})
      require(o.contains(k) && o[k].is_string(), std::string("trial: output without a string '") + k + "'");
  const json& ins = b.at("inputs");
  require(ins.is_array(), "trial: 'inputs' is not an array");
  if (with_inputs || !ins.empty()) require(ins.size() == plan.inputs.size(), "trial: wrong input count");
  for (auto& i : ins)
    for (const char* k : {"digest_before", "digest_after"})
      require(i.contains(k) && i[k].is_string(), std::string("trial: input without a string '") + k + "'");
}

/// The timing frame: counts the driver planned, arrays of one entry per timed call. What the checks
/// rest on is compared with the driver's own plan, never taken from the worker: whether the calls
/// were checked, and how many values per output were sampled (a worker that reports 0 samples has
/// checked nothing).
void validate_timing(const json& b, const std::string& blob, const StepPlan& plan, const std::vector<int>& full_calls) {
  std::string mode = b.at("mode").get<std::string>();
  require(mode == "eager" || mode == "graph", "timing: unknown mode '" + mode + "'");
  if (mode == "eager")
    require(b.contains("checked") && b["checked"].is_boolean() && b["checked"].get<bool>() == plan.timing.checks,
            std::string("timing: the calls were reported ") + (b.value("checked", false) ? "checked" : "unchecked") +
                ", the plan says " + (plan.timing.checks ? "checked" : "unchecked"));
  int iters = b.at("iters").get<int>();
  require(iters == plan.timing.iters,
          "timing: " + std::to_string(iters) + " timed calls reported, " + std::to_string(plan.timing.iters) + " planned");
  require(b.at("warmup").is_number_integer() && b.at("groups").is_number_integer(), "timing: warmup/groups not integers");
  const json& times = b.at("times_ms");
  require(times.is_array() && times.size() == static_cast<size_t>(iters) &&
              std::all_of(times.begin(), times.end(), [](const json& x) { return x.is_number(); }),
          "timing: times_ms is not one number per timed call");
  require(b.at("span_ms").is_number() && b.at("host_ms").is_number(), "timing: span_ms/host_ms not numbers");
  const json& outs = b.at("outputs");
  require(outs.is_array() && outs.size() == plan.outputs.size(), "timing: wrong output count");
  size_t sample_bytes = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const json& o = outs[i];
    if (mode == "graph") {  // one check after the replay
      require(is_count(o.at("unwritten")) && is_count(o.at("nonfinite")), "timing (graph): unwritten/nonfinite are not counts");
      continue;
    }
    require(is_count_array(o.at("unwritten"), iters) && is_count_array(o.at("nonfinite"), iters),
            "timing: unwritten/nonfinite are not one count per timed call");
    require(o.at("digests").is_array() && o.at("digests").size() == static_cast<size_t>(iters),
            "timing: digests are not one per timed call");
    require(is_count(o.at("samples")), "timing: samples is not a count");
    size_t planned = plan.timing.checks
                         ? std::min<size_t>(static_cast<size_t>(plan.timing.samples_per_output), plan.outputs[i].numel())
                         : o.at("samples").get<size_t>();
    require(o.at("samples").get<size_t>() == planned, "timing: " + std::to_string(o.at("samples").get<size_t>()) +
                                                          " sampled values of output " + std::to_string(i) +
                                                          " per call reported, " + std::to_string(planned) + " planned");
    sample_bytes += o.at("samples").get<size_t>() * dtype_size(plan.outputs[i].dtype) * static_cast<size_t>(iters);
  }
  // After the samples: every output of each fully checked call, whole.
  size_t full_bytes = 0;
  if (mode == "eager" && plan.timing.checks)
    for (auto& d : plan.outputs) full_bytes += d.bytes() * full_calls.size();
  require(mode == "graph" || blob.size() == sample_bytes + full_bytes,
          "timing: the sampled values and fully checked outputs are not the size the plan says");
  const json& ins = b.at("inputs");
  require(ins.is_array(), "timing: 'inputs' is not an array");
  if (mode == "eager") {
    require(ins.size() == plan.inputs.size(), "timing: wrong input count");
    for (auto& i : ins)
      require(i.at("gen").is_array() && i.at("gen").size() == static_cast<size_t>(iters) && i.at("after").is_array() &&
                  i.at("after").size() == static_cast<size_t>(iters),
              "timing: input fingerprints are not one per timed call");
  }
}

/// A timed call's commit: its index is the next one expected, one fingerprint per output.
CallCommit validate_call(const json& b, const StepPlan& plan, int expected) {
  int call = b.at("call").get<int>();
  require(call == expected, "timed call " + std::to_string(call) + " reported, call " + std::to_string(expected) +
                                " expected (each call once, in order)");
  CallCommit c;
  if (call < 0) return c;  // "ready": the warm-up is over
  require(b.at("time_ms").is_number() && b["time_ms"].get<double>() >= 0, "call: time_ms is not a non-negative number");
  c.time_ms = b["time_ms"].get<double>();
  const json& outs = b.at("outputs");
  require(outs.is_array() && outs.size() == plan.outputs.size(), "call: wrong output count");
  for (auto& o : outs) {
    require(o.at("digest").is_string() && is_count(o.at("unwritten")) && is_count(o.at("nonfinite")),
            "call: an output without digest/unwritten/nonfinite");
    c.digests.push_back(o["digest"].get<std::string>());
    c.unwritten.push_back(o["unwritten"].get<unsigned long long>());
    c.nonfinite.push_back(o["nonfinite"].get<unsigned long long>());
  }
  return c;
}

struct RankState {
  FrameDecoder dec;
  size_t phase_index = 0;  // where in phase_sequence() the worker is
  bool eof = false, done = false, errored = false, counted_exit = false, timed_out = false;
  Phase phase;  // start
  int step = 0;
  Clock::time_point phase_start;
  Clock::time_point last_idle;  // last time the channel was seen empty (nothing sent before it was read)
  Clock::time_point phase_idle;  // last_idle when the current phase was announced
  std::optional<ExitInfo> exit;
  Clock::time_point exit_seen;
  int next_call = -1;  // the timed call whose commit is expected next (-1: "ready")
  double granted_s = 0;  // when the seed of call next_call was sent
  std::vector<std::pair<std::string, double>> phase_s;  // seconds per phase group (JobResult::phase_s)
  Clock::time_point done_at;  // when 'done' arrived: teardown runs from here

  /// Adds the time from the current phase's start to `now` to its group.
  void close_phase(Clock::time_point now) {
    std::string group = phase.kind == Phase::Kind::trial ? "trials" : phase.name();
    double secs = std::chrono::duration<double>(now - phase_start).count();
    auto it = std::find_if(phase_s.begin(), phase_s.end(), [&](const auto& p) { return p.first == group; });
    if (it == phase_s.end()) phase_s.emplace_back(group, secs);
    else it->second += secs;
  }
};

/// The slowest rank's seconds per phase group, in the order of the first rank that has each.
std::vector<std::pair<std::string, double>> slowest_per_phase(const std::vector<RankState>& ranks) {
  std::vector<std::pair<std::string, double>> out;
  for (auto& s : ranks)
    for (auto& [group, secs] : s.phase_s) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == group; });
      if (it == out.end()) out.emplace_back(group, secs);
      else it->second = std::max(it->second, secs);
    }
  return out;
}

std::chrono::milliseconds limit_for(const Phase& phase, const Deadlines& d) {
  switch (phase.kind) {
    case Phase::Kind::start:
    case Phase::Kind::setup:
    case Phase::Kind::load: return d.setup;
    case Phase::Kind::init: return d.init;
    case Phase::Kind::trial: return d.trial;
    case Phase::Kind::timing: return d.timing;
    case Phase::Kind::profile: return d.profile;
    case Phase::Kind::finalize: return d.finalize;
    case Phase::Kind::teardown: return d.teardown;
  }
  return d.teardown;
}

class JobRunner {
 public:
  JobRunner(Launcher& l, const JobConfig& cfg) : launcher_(l), cfg_(cfg) {
    for (auto& plan : cfg_.plans) sequences_.push_back(phase_sequence(plan));
    // The whole job's deadline: every phase at its own limit, back to back. Nothing a worker sends
    // extends it.
    job_limit_ = std::chrono::milliseconds(0);
    if (!sequences_.empty())
      for (auto& k : sequences_[0]) job_limit_ += limit_for(k.phase, cfg_.deadlines);
    if (cfg_.deadlines.job.count() > 0) job_limit_ = std::min(job_limit_, cfg_.deadlines.job);
  }

  JobResult run() {
    auto t0 = start_ = res_.started = Clock::now();
    int W = static_cast<int>(cfg_.plans.size());
    job_ = launcher_.launch(cfg_.launch);
    res_.containment = job_->containment();
    res_.sandbox = job_->sandbox();
    res_.isolated = job_->isolated();
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
      ranks_[r].phase_s = {{"start", std::chrono::duration<double>(ranks_[r].phase_start - t0).count()}};  // the launch
      try {
        // A worker that stops reading must not block the driver's grants: writes give up after 2 s.
        timeval tv{2, 0};
        setsockopt(job_->channel(r), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        // The plan without the steps' secret seeds (seal_for_worker): timed calls get theirs one by one.
        send_message(job_->channel(r), {MsgKind::plan, json(seal_for_worker(cfg_.plans[r])), {}});
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
        int step = m.body.at("step").get<int>();
        std::string word = m.body.at("phase").get<std::string>();
        std::optional<Phase> named = Phase::parse(word);
        if (!named)
          violation("phase '" + word + "' of step " + std::to_string(step) + " is not a phase of this job's plan, after '" +
                    s.phase.name() + "'");
        PhaseKey k{step, *named};
        const auto& seq = sequences_[r];
        auto it = std::find(seq.begin() + static_cast<long>(s.phase_index) + 1, seq.end(), k);
        if (it == seq.end()) {
          bool seen = std::find(seq.begin(), seq.begin() + static_cast<long>(s.phase_index) + 1, k) !=
                      seq.begin() + static_cast<long>(s.phase_index) + 1;
          violation("phase '" + word + "' of step " + std::to_string(k.step) +
                    (seen ? " announced again (a phase is announced once; its deadline runs from the first time)"
                          : " is not a phase of this job's plan") +
                    ", after '" + s.phase.name() + "'");
        }
        s.phase_index = static_cast<size_t>(it - seq.begin());
        s.close_phase(Clock::now());
        s.phase = k.phase;
        s.step = k.step;
        s.phase_start = Clock::now();
        s.phase_idle = s.last_idle;
        if (k.phase.kind == Phase::Kind::timing) s.next_call = -1;  // each step's timed calls are committed from "ready" on
        report_progress();
        break;
      }
      case MsgKind::trial: store_trial(r, std::move(m)); break;
      case MsgKind::call: on_call(r, m.body); break;
      case MsgKind::timing: {
        StepResult& sr = step_of(m.body);
        require(s.phase.kind == Phase::Kind::timing && s.step == m.body.at("step").get<int>(),
                "a timing frame outside the timing phase");
        const StepPlan& plan = cfg_.plans[r].steps[s.step];
        if (m.body.value("mode", std::string()) == "eager")
          require(s.next_call == plan.timing.iters, "the timing report before every timed call was committed (" +
                                                        std::to_string(std::max(s.next_call, 0)) + " of " +
                                                        std::to_string(plan.timing.iters) + ")");
        validate_timing(m.body, m.blob, plan, sr.full_calls);
        // The driver's own clock around the timed phase, an upper bound the worker cannot move: the
        // phase was announced after the channel was last seen empty, the result arrived by now.
        m.body["driver_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - s.phase_idle).count();
        auto& into = m.body.value("mode", std::string("eager")) == "graph" ? sr.graph : sr.timing;
        if (into.empty()) into.resize(ranks_.size());
        require(into[r].body.is_null(), "a second timing frame of the same mode for one step");
        into[r] = {std::move(m.body), std::move(m.blob)};
        break;
      }
      case MsgKind::error: {
        s.errored = true;
        auto st = parse_status(m.body.value("status", std::string("runtime_error")));
        std::string phase = m.body.value("phase", s.phase.name());  // as the worker names it: recorded, not acted on
        if (s.done) {  // after results: a teardown problem, not the solution's failure
          res_.teardown_clean = false;
          break;
        }
        note({Cause::reported, st.value_or(Status::runtime_error), r, phase, m.body.value("message", std::string()),
              Clock::now()});
        break;
      }
      case MsgKind::profile: {
        StepResult& sr = step_of(m.body);
        require(s.phase.kind == Phase::Kind::profile && s.step == m.body.at("step").get<int>(),
                "a profile frame outside the profile phase");
        if (sr.profile.empty()) sr.profile.resize(ranks_.size());
        require(sr.profile[r].is_null(), "a second profile frame for one step");
        // What the activity says is the solution's process's word: eval/profile_out.cpp reads it
        // as such, and nothing in it reaches a verdict.
        sr.profile[r] = std::move(m.body);
        break;
      }
      case MsgKind::done:
        require(s.phase.kind == Phase::Kind::finalize && s.step + 1 == static_cast<int>(cfg_.plans[r].steps.size()),
                "'done' before the last step's finalize");
        require_all_results(r);
        s.done = true;
        s.done_at = Clock::now();
        break;
      case MsgKind::plan:
      case MsgKind::grant:
      case MsgKind::join:
      case MsgKind::op:
      case MsgKind::reply: violation("a worker sent an unexpected " + std::string(to_string(m.kind)) + " message");
    }
  }

  /// A timed call's commit: stored with the driver's clock, answered with the call's sample key and
  /// full-check flag (revealed only now) and the next call's seed (which did not exist in the worker
  /// before this call had run and been reported).
  void on_call(int r, const json& body) {
    RankState& s = ranks_[r];
    require(s.phase.kind == Phase::Kind::timing && s.step == body.at("step").get<int>(), "a call frame outside the timing phase");
    StepResult& sr = step_of(body);
    const StepPlan& plan = cfg_.plans[r].steps[s.step];
    CallCommit c = validate_call(body, plan, s.next_call);
    double now = std::chrono::duration<double>(Clock::now() - start_).count();
    int call = s.next_call;
    if (sr.full_calls.empty() && plan.timing.full_checks > 0)
      sr.full_calls = full_check_calls(plan.seed, plan.timing.iters, plan.timing.full_checks);
    if (call >= 0) {
      c.granted_s = s.granted_s;
      c.received_s = now;
      if (sr.calls.empty()) sr.calls.resize(ranks_.size());
      sr.calls[r].push_back(std::move(c));
    }
    json g{{"step", s.step}, {"call", call}};
    if (call >= 0) {
      g["sample_key"] = sample_key(plan.seed, call);
      g["full"] = std::find(sr.full_calls.begin(), sr.full_calls.end(), call) != sr.full_calls.end();
    }
    if (call + 1 < plan.timing.iters) g["next_seed"] = stream_seed(plan.seed, kTimedStream + static_cast<uint64_t>(call + 1));
    s.next_call = call + 1;
    Answer a{r, s.step, call, plan.timing.iters, std::move(g)};
    if (cfg_.gate) {  // interleaved timing: the answer may have to wait for the other job's round
      cfg_.gate->committed(cfg_.gate_side, a.step, r, call);
      if (!cfg_.gate->may_answer(cfg_.gate_side, a.step, call, a.iters)) {
        held_.push_back(std::move(a));
        return;
      }
    }
    answer(a);
  }

  /// An answer to a timed call's commit, sent now: the next call's window on the driver's clock
  /// starts here.
  struct Answer {
    int rank, step, call, iters;
    json body;
  };
  void answer(Answer& a) {
    ranks_[a.rank].granted_s = std::chrono::duration<double>(Clock::now() - start_).count();
    send_message(job_->channel(a.rank), {MsgKind::grant, std::move(a.body), {}});
  }

  /// Sends the held answers whose turn has come (interleaved timing).
  void release_held() {
    for (size_t i = 0; i < held_.size();) {
      Answer& a = held_[i];
      if (ranks_[a.rank].eof || ranks_[a.rank].errored) {
        held_.erase(held_.begin() + static_cast<long>(i));
        continue;
      }
      if (!cfg_.gate->may_answer(cfg_.gate_side, a.step, a.call, a.iters)) {
        ++i;
        continue;
      }
      Answer sent = std::move(a);
      held_.erase(held_.begin() + static_cast<long>(i));
      try {
        answer(sent);
      } catch (const Error& e) {
        note({Cause::crash, Status::crash, sent.rank, ranks_[sent.rank].phase.name(),
              std::string("could not answer a timed call: ") + e.what(), Clock::now()});
      }
    }
  }

  /// Before a rank may say it is done: every trial's results and, where timed, its timing report.
  /// (Phases can be announced without doing their work; the results cannot be skipped.)
  void require_all_results(int r) {
    for (size_t si = 0; si < res_.steps.size(); ++si) {
      const StepResult& sr = res_.steps[si];
      for (size_t t = 0; t < sr.trials.size(); ++t)
        require(sr.trials[t][r].meta.is_object(),
                "'done' without the results of step " + std::to_string(si) + " trial " + std::to_string(t));
      if (cfg_.plans[r].steps[si].timing.enabled)
        require(sr.timing.size() > static_cast<size_t>(r) && sr.timing[r].body.is_object(),
                "'done' without the timing report of step " + std::to_string(si));
    }
  }

  StepResult& step_of(const json& body) {
    int s = body.at("step").get<int>();
    if (s < 0 || s >= static_cast<int>(res_.steps.size())) violation("step index out of range");
    return res_.steps[s];
  }

  void store_trial(int r, Message m) {
    StepResult& sr = step_of(m.body);
    const StepPlan& plan = cfg_.plans[r].steps[m.body.at("step").get<int>()];
    int t = m.body.at("trial").get<int>();
    if (t < 0 || t >= static_cast<int>(sr.trials.size())) violation("trial index out of range");
    const RankState& s = ranks_[r];
    require(s.phase == Phase{Phase::Kind::trial, t} && s.step == m.body.at("step").get<int>(),
            "the results of trial " + std::to_string(t) + " arrived during " + s.phase.name());
    require(!sr.trials[t][r].meta.is_object(), "trial " + std::to_string(t) + " reported twice");
    validate_trial_meta(m.body, plan, cfg_.plans[r].send_inputs);
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
    std::string key = std::to_string(ranks_[0].step) + ":" + ranks_[0].phase.name();
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
    int n = poll(pfds.data(), pfds.size(), held_.empty() ? 20 : 1);  // held answers: look again soon
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
      } catch (const std::exception& e) {
        // A malformed frame (bad bytes, a missing key, a wrong type), an unexpected or repeated
        // one: the worker's fault. Stop listening to this rank; the grace period collects the rest,
        // then the job is killed.
        ranks_[r].eof = true;
        ranks_[r].errored = true;
        note({Cause::protocol, Status::protocol_error, r, ranks_[r].phase.name(),
              std::string("rank ") + std::to_string(r) + " broke the control protocol (" + e.what() + ")", Clock::now()});
      }
    }
  }

  void check_exits_and_deadlines() {
    auto now = Clock::now();
    if (!job_timed_out_ && !all_done() && now - start_ > job_limit_) {
      job_timed_out_ = true;
      int r = 0;  // the rank furthest behind is the one holding the job up
      for (int i = 1; i < static_cast<int>(ranks_.size()); ++i)
        if (!ranks_[i].done && ranks_[i].phase_index < ranks_[r].phase_index) r = i;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double>(job_limit_).count());
      note({Cause::timeout, Status::timeout, r, ranks_[r].phase.name(),
            "the job ran past its deadline of " + std::string(buf) + " s (every phase at its limit); rank " + std::to_string(r) +
                " was in " + ranks_[r].phase.name(),
            now});
    }
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
        note({Cause::crash, Status::crash, r, s.phase.name(),
              "rank " + std::to_string(r) + " disconnected during " + s.phase.name() +
                  " without a report (the launcher's log has its exit)",
              now});
      }
      if (s.exit && drained && !s.done && !s.errored && !s.counted_exit) {
        s.counted_exit = true;
        std::string how =
            s.exit->exited ? "exited with code " + std::to_string(s.exit->code) : "was killed by " + s.exit->describe();
        note({Cause::crash, Status::crash, r, s.phase.name(),
              "rank " + std::to_string(r) + " " + how + " during " + s.phase.name(), now});
      }
      if (!s.done && !s.errored && !s.exit && now - s.phase_start > limit_for(s.phase, cfg_.deadlines) && !s.timed_out) {
        s.timed_out = true;
        auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(limit_for(s.phase, cfg_.deadlines)).count() / 1000.0;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f", secs);
        note({Cause::timeout, Status::timeout, r, s.phase.name(),
              "rank " + std::to_string(r) + " spent more than " + buf + " s in " + s.phase.name(), now});
      }
    }
  }

  void loop() {
    while (true) {
      check_interrupted();  // the Job's destructor kills the workers on the way out
      read_ready();
      if (cfg_.gate) {
        if (first_failure_) cfg_.gate->leave(cfg_.gate_side);  // the other job must not wait for a failed one
        release_held();
      }
      check_exits_and_deadlines();
      if (first_failure_ && Clock::now() - *first_failure_ > cfg_.deadlines.grace) break;
      if (all_done()) break;
    }
    if (cfg_.gate) cfg_.gate->leave(cfg_.gate_side);
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
        RankState& s = ranks_[r];
        if (!s.exit) {
          s.exit = job_->poll_exit(r);
          if (s.exit) s.exit_seen = Clock::now();
        }
        all_exited &= s.exit.has_value();
      }
      if (all_exited) break;
    }
    bool all_exited = true;
    for (auto& s : ranks_) {
      if (!s.exit || !s.exit->exited || s.exit->code != 0) res_.teardown_clean = false;
      all_exited &= s.exit.has_value();
    }
    if (all_exited) res_.leftover_processes = job_->leftovers().size();
    for (auto& s : ranks_) {
      if (!s.exit) continue;  // still running at the teardown deadline: it has no teardown time
      if (s.phase.kind != Phase::Kind::teardown) {  // exited without announcing teardown: it began at 'done'
        s.close_phase(s.done_at);
        s.phase = Phase{Phase::Kind::teardown};
        s.phase_start = s.done_at;
      }
      s.close_phase(std::max(s.exit_seen, s.phase_start));  // teardown: until the exit was seen
    }
    res_.phase_s = slowest_per_phase(ranks_);
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
  std::vector<Answer> held_;  // answers waiting for their turn (interleaved timing)
  std::string last_phase_;
  JobResult res_;
  std::vector<std::vector<PhaseKey>> sequences_;  // per rank
  std::chrono::milliseconds job_limit_{0};
  Clock::time_point start_;
  bool job_timed_out_ = false;
};

}  // namespace

JobResult run_job(Launcher& launcher, const JobConfig& cfg) { return JobRunner(launcher, cfg).run(); }

}  // namespace pkb
