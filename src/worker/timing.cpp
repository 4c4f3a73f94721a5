// The timed phase of a rank's checker: warm-up, then timed calls, each with inputs that did not
// exist before the previous call had run and been reported, and every output checked. Per timed
// call i (C: the checker, R: the runner, where the solution runs):
//   C [grant: call i's seed] generates inputs -> flushes L2 -> poisons outputs
//   R resets persisting L2 -> barrier + GPU-side delay -> [start] pkb_run [stop] -> "returned"
//   C fingerprints the outputs at return (after the runner's event)
//   R device synchronize -> "finished" with the event time
//   C commits (time, fingerprints) to the driver -> [grant: call i's sample key, full-check flag,
//     call i+1's seed] -> R barrier -> C fingerprints again, samples, input fingerprints, whole
//     outputs if the call is fully checked.
// Only pkb_run sits between the two events. The runner never holds a seed, a sample key or the
// full-check choice; the checker holds each only from when the driver sends it. A reported event
// time longer than the checker's own clock around the call is a forgery.
//
// Graph mode (--graph) adds, after the checked eager calls, one CUDA graph of all timed calls back to
// back and times its replay: pure device time without launch costs; its outputs are checked once,
// after the replay, for being written and finite.
#include <chrono>

#include "core/cuda_check.hpp"
#include "core/philox.hpp"
#include "core/poison.hpp"
#include "worker/runner.hpp"
#include "worker/session.hpp"

namespace pkb::worker {

using nlohmann::json;

namespace {

double host_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Per-call device buffers for the checks of timed calls.
struct TimedChecks {
  DeviceBuffer in_gen, in_after, out_return, out_after;
  std::vector<DeviceBuffer> positions, samples;
  std::vector<int> k;
  TimedChecks(const StepPlan& step, int iters, cudaStream_t s) {
    size_t n_in = step.inputs.size(), n_out = step.outputs.size();
    in_gen = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_in * iters, 1));
    in_after = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_in * iters, 1));
    out_return = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_out * iters, 1));
    out_after = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_out * iters, 1));
    for (auto* b : {&in_gen, &in_after, &out_return, &out_after}) CUDA_CHECK(cudaMemsetAsync(b->get(), 0, b->bytes(), s));
    for (auto& d : step.outputs) {
      int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(step.timing.samples_per_output), d.numel()));
      k.push_back(n);
      positions.emplace_back(std::max<size_t>(n * sizeof(uint64_t), 8));
      samples.emplace_back(std::max<size_t>(n * dtype_size(d.dtype) * iters, 8));
    }
  }
};

}  // namespace

void Session::regenerate(TensorSet& set, uint64_t seed, uint64_t stream, CheckSlot* digest_slots) {
  set.seed = seed;
  set.stream = stream;
  for (size_t i = 0; i < step_->inputs.size(); ++i) {
    auto& d = step_->inputs[i];
    // Warm-up and timed calls are held-out calls (heldout_trial in core/dist.hpp).
    launch_generate(set.data[i], d.dtype, d.numel(), held_out(d.dist), input_key(seed, stream, plan_.rank, i, d.dist),
                    hs_->get());
    if (digest_slots) launch_check(set.data[i], d.dtype, d.numel(), 0, digest_slots + i, hs_->get());
  }
}

void Session::send_timing(const json& body, std::string samples) {
  json b = body;
  b["step"] = step_index_;
  send_message(fd_, {MsgKind::timing, std::move(b), std::move(samples)});
}

json Session::commit_call(int call, json body) {
  body["step"] = step_index_;
  body["call"] = call;
  send_message(fd_, {MsgKind::call, std::move(body), {}});
  auto m = recv_message(fd_);
  if (!m || m->kind != MsgKind::grant || m->body.value("step", -1) != step_index_ || m->body.value("call", -2) != call)
    throw WorkerFailure(Status::protocol_error,
                        "timed call " + std::to_string(call) + ": the driver's answer did not arrive on the control channel");
  return std::move(m->body);
}

void Session::run_timing() {
  enter("timing");
  const TimingPlan& tp = step_->timing;
  const size_t n_in = step_->inputs.size(), n_out = step_->outputs.size();
  cudaStream_t s = hs_->get();

  // Warm-up (neither timed nor checked): inputs from the warm-up seed, a few probe calls to size it
  // (the runner agrees on the count with every rank).
  for (int g = 0; g < 2; ++g) regenerate(ins_[g], step_->warmup_seed, kWarmupStream + static_cast<uint64_t>(g), nullptr);
  CUDA_CHECK(cudaStreamSynchronize(s));
  json wr = runner_->call({{"op", "warmup"},
                           {"sets", {ins_[0].id, ins_[1].id}},
                           {"out", out_.id},
                           {"params", {call_params(ins_[0]), call_params(ins_[1])}},
                           {"probe", std::min(tp.warmup, 5)},
                           {"warmup", tp.warmup},
                           {"budget_ms", tp.warmup_budget_ms}});
  int warmup = wr.value("warmup", -1);
  if (warmup < 0) throw WorkerFailure(Status::protocol_error, "the solution's process reported no warm-up count");

  // Cold caches: the generated inputs are pushed out of L2 by writing l2_factor x L2 of other data.
  size_t l2 = l2_bytes_ ? l2_bytes_ : (60u << 20);
  DeviceBuffer flush(static_cast<size_t>(std::max(tp.l2_factor, 1.0) * static_cast<double>(l2)));
  TimedChecks chk(*step_, tp.iters, s);
  CheckSlot* in_gen = chk.in_gen.as<CheckSlot>();
  CheckSlot* in_after = chk.in_after.as<CheckSlot>();
  CheckSlot* out_return = chk.out_return.as<CheckSlot>();
  CheckSlot* out_after = chk.out_after.as<CheckSlot>();
  std::vector<CheckSlot> ret(n_out);
  std::string full_blob;
  json times = json::array();
  int l2_resets = 0;

  json grant = commit_call(-1, json::object());  // ready: the first timed call's seed comes back
  CUDA_CHECK(cudaStreamSynchronize(s));
  auto host_start = std::chrono::steady_clock::now();
  for (int t = 0; t < tp.iters; ++t) {
    uint64_t seed = grant.at("next_seed").get<uint64_t>();
    TensorSet& in = ins_[t % 2];
    regenerate(in, seed, kTimedStream + static_cast<uint64_t>(t), in_gen + t * n_in);
    CUDA_CHECK(cudaMemsetAsync(flush.get(), t & 0xff, flush.bytes(), s));
    uint64_t pcall = poison_bits(seed, static_cast<uint64_t>(step_->trials + warmup + t));
    std::vector<uint64_t> poisons;
    for (size_t o = 0; o < n_out; ++o) {
      const TensorDesc& d = step_->outputs[o];
      poisons.push_back(poison_pattern(d.dtype, rng::mix64(pcall + o)));
      launch_fill_pattern(out_.data[o], dtype_size(d.dtype), d.numel(), poisons[o], s);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    auto call_start = std::chrono::steady_clock::now();
    json f = run_call(in, json{{"delay_us", tp.predelay_us}, {"clear_l2", true}, {"timed", t}},
                      tp.checks ? out_return + t * n_out : nullptr, poisons);
    double around_ms = host_ms_since(call_start);
    double ms = f["ms"].get<double>();
    if (!(ms >= 0) || ms > around_ms) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "timed call %d: the solution's process reported %.3f ms, outside the %.3f ms the checker saw", t, ms,
                    around_ms);
      throw WorkerFailure(Status::protocol_error, buf);
    }
    if (f.value("l2_reset", false)) ++l2_resets;  // the runner undid a limit the solution set
    times.push_back(ms);
    json outs = json::array();
    if (tp.checks) {
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaMemcpy(ret.data(), out_return + t * n_out, n_out * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
      for (size_t o = 0; o < n_out; ++o)
        outs.push_back({{"digest", hex64(ret[o].digest)}, {"unwritten", ret[o].unwritten}, {"nonfinite", ret[o].nonfinite}});
    } else {
      for (size_t o = 0; o < n_out; ++o) outs.push_back({{"digest", "0"}, {"unwritten", 0}, {"nonfinite", 0}});
    }
    grant = commit_call(t, json{{"time_ms", ms}, {"outputs", outs}});
    if (!tp.checks) continue;  // measuring the cost of the checks themselves (--unchecked-timing)
    // The driver answers each rank as it commits: wait until every rank has finished this call,
    // then fingerprint again and read the values at the positions revealed only now.
    runner_->call({{"op", "barrier"}});
    uint64_t skey = grant.at("sample_key").get<uint64_t>();
    for (size_t o = 0; o < n_out; ++o) {
      const TensorDesc& d = step_->outputs[o];
      size_t esz = dtype_size(d.dtype);
      check_output(o, poisons[o], out_after + t * n_out + o);
      auto pos = sample_positions(skey, plan_.rank, static_cast<int>(o), d.numel(), step_->timing.samples_per_output);
      if (!pos.empty())
        CUDA_CHECK(cudaMemcpyAsync(chk.positions[o].get(), pos.data(), pos.size() * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
      launch_gather_samples(out_.data[o], esz, chk.positions[o].as<uint64_t>(), chk.k[o],
                            chk.samples[o].as<char>() + static_cast<size_t>(t) * chk.k[o] * esz, s, row_limit(o));
      if (!pos.empty()) CUDA_CHECK(cudaStreamSynchronize(s));  // pos is a host vector about to go
    }
    for (size_t i = 0; i < n_in; ++i)
      launch_check(in.data[i], step_->inputs[i].dtype, step_->inputs[i].numel(), 0, in_after + t * n_in + i, s);
    if (grant.value("full", false)) {
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (size_t o = 0; o < n_out; ++o) {
        size_t off = full_blob.size(), bytes = step_->outputs[o].bytes();
        full_blob.resize(off + bytes);
        if (bytes) CUDA_CHECK(cudaMemcpy(full_blob.data() + off, out_.data[o], bytes, cudaMemcpyDeviceToHost));
      }
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  double host_ms = host_ms_since(host_start);
  double span = runner_->call({{"op", "span"}}).value("span_ms", 0.0);

  std::vector<CheckSlot> hg(n_in * tp.iters), ha(n_in * tp.iters), ho(n_out * tp.iters);
  if (n_in) {
    CUDA_CHECK(cudaMemcpy(hg.data(), in_gen, hg.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ha.data(), in_after, ha.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
  }
  if (n_out) CUDA_CHECK(cudaMemcpy(ho.data(), out_after, ho.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
  json outs = json::array(), ins = json::array();
  std::string blob;
  for (size_t o = 0; o < n_out; ++o) {
    json dig = json::array(), unw = json::array(), nf = json::array();
    for (int t = 0; t < tp.iters; ++t) {
      const CheckSlot& c = ho[t * n_out + o];
      dig.push_back(hex64(c.digest));
      unw.push_back(c.unwritten);
      nf.push_back(c.nonfinite);
    }
    int k = tp.checks ? chk.k[o] : 0;
    outs.push_back({{"name", step_->outputs[o].name}, {"digests", dig}, {"unwritten", unw}, {"nonfinite", nf}, {"samples", k}});
    size_t bytes = static_cast<size_t>(k) * dtype_size(step_->outputs[o].dtype) * tp.iters;
    size_t off = blob.size();
    blob.resize(off + bytes);
    if (bytes) CUDA_CHECK(cudaMemcpy(blob.data() + off, chk.samples[o].get(), bytes, cudaMemcpyDeviceToHost));
  }
  blob += full_blob;
  for (size_t i = 0; i < n_in; ++i) {
    json gen = json::array(), after = json::array();
    for (int t = 0; t < tp.iters; ++t) {
      gen.push_back(hex64(hg[t * n_in + i].digest));
      after.push_back(hex64(ha[t * n_in + i].digest));
    }
    ins.push_back({{"name", step_->inputs[i].name}, {"gen", gen}, {"after", after}});
  }
  send_timing(json{{"mode", "eager"},
                   {"checked", tp.checks},
                   {"warmup", warmup},
                   {"iters", tp.iters},
                   {"groups", 2},
                   {"times_ms", times},
                   {"span_ms", span},
                   {"host_ms", host_ms},
                   {"l2_resets", l2_resets},
                   {"outputs", outs},
                   {"inputs", ins}},
              std::move(blob));
  if (tp.graph) run_graph_timing();  // after the checked calls: the same solution, replayed
}

void Session::run_graph_timing() {
  const TimingPlan& tp = step_->timing;
  cudaStream_t s = hs_->get();
  for (size_t o = 0; o < step_->outputs.size(); ++o) {
    const TensorDesc& d = step_->outputs[o];
    launch_fill_pattern(out_.data[o], dtype_size(d.dtype), d.numel(), poison_pattern(d.dtype, 0x5eed + o), s);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  auto host_start = std::chrono::steady_clock::now();
  json g = runner_->call({{"op", "graph"},
                          {"sets", {ins_[0].id, ins_[1].id}},
                          {"out", out_.id},
                          {"params", {call_params(ins_[0]), call_params(ins_[1])}},
                          {"iters", tp.iters},
                          {"delay_us", tp.predelay_us}});
  double around_ms = host_ms_since(host_start);
  double ms = g.value("ms", -1.0), host_ms = g.value("host_ms", -1.0);
  if (!(ms >= 0) || ms > around_ms || !(host_ms >= 0) || host_ms > around_ms)
    throw WorkerFailure(Status::protocol_error,
                        "graph replay: the solution's process reported times outside the checker's clock");
  DeviceBuffer slots(sizeof(CheckSlot) * std::max<size_t>(step_->outputs.size(), 1));
  CUDA_CHECK(cudaMemsetAsync(slots.get(), 0, slots.bytes(), s));
  for (size_t o = 0; o < step_->outputs.size(); ++o) {
    const TensorDesc& d = step_->outputs[o];
    check_output(o, poison_pattern(d.dtype, 0x5eed + o), slots.as<CheckSlot>() + o);
  }
  std::vector<CheckSlot> h(step_->outputs.size());
  CUDA_CHECK(cudaMemcpyAsync(h.data(), slots.get(), h.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  json outs = json::array(), times = json::array();
  for (size_t o = 0; o < h.size(); ++o)
    outs.push_back({{"name", step_->outputs[o].name}, {"unwritten", h[o].unwritten}, {"nonfinite", h[o].nonfinite}});
  for (int i = 0; i < tp.iters; ++i) times.push_back(ms / tp.iters);  // a graph gives one interval: its mean
  send_timing(json{{"mode", "graph"},
                   {"warmup", 0},
                   {"iters", tp.iters},
                   {"groups", 2},
                   {"times_ms", times},
                   {"span_ms", ms},
                   {"host_ms", host_ms},
                   {"outputs", outs},
                   {"inputs", json::array()}},
              {});
}

}  // namespace pkb::worker
