// The timed phase of a worker: warm-up, then timed calls, each with fresh inputs and a full check
// of its outputs. Per call, on the solution's stream:
//   poison outputs -> barrier over all ranks + GPU-side delay -> [start] pkb_run [stop]
//   -> check outputs (digest, unwritten, non-finite) and gather samples -> check inputs
//   -> regenerate this input group for the call G ahead.
// Only pkb_run sits between the two events. Input groups rotate so that the working set exceeds
// L2 (cold-cache conditions); regeneration gives every call inputs no earlier call saw.
//
// Graph mode (--graph) adds, after the checked eager calls, one CUDA graph of all timed calls back to
// back and times its replay: pure device time without launch costs; its outputs are checked once,
// after the replay, for being written and finite.
#include <chrono>

#include "core/cuda_check.hpp"
#include "core/philox.hpp"
#include "core/poison.hpp"
#include "worker/session.hpp"

namespace pkb::worker {

using nlohmann::json;

namespace {

struct CallPlan {
  int warmup = 0, iters = 0, groups = 2;
  uint64_t stream(int c) const {
    return c < warmup ? kWarmupStream + static_cast<uint64_t>(c) : kTimedStream + static_cast<uint64_t>(c - warmup);
  }
  int total() const { return warmup + iters; }
};

double host_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Per-call device buffers for the checks of timed calls.
struct TimedChecks {
  DeviceBuffer in_gen, in_after, out_slots;
  std::vector<DeviceBuffer> positions, samples;
  std::vector<int> k;
  TimedChecks(const StepPlan& step, int rank, int iters, cudaStream_t s) {
    size_t n_in = step.inputs.size(), n_out = step.outputs.size();
    in_gen = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_in * iters, 1));
    in_after = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_in * iters, 1));
    out_slots = DeviceBuffer(sizeof(CheckSlot) * std::max<size_t>(n_out * iters, 1));
    for (auto* b : {&in_gen, &in_after, &out_slots}) CUDA_CHECK(cudaMemsetAsync(b->get(), 0, b->bytes(), s));
    for (size_t o = 0; o < n_out; ++o) {
      auto pos = sample_positions(step.seed, rank, static_cast<int>(o), step.outputs[o].numel(), step.timing.samples_per_output);
      k.push_back(static_cast<int>(pos.size()));
      positions.emplace_back(std::max<size_t>(pos.size() * sizeof(uint64_t), 8));
      CUDA_CHECK(cudaMemcpy(positions.back().get(), pos.data(), pos.size() * sizeof(uint64_t), cudaMemcpyHostToDevice));
      samples.emplace_back(std::max<size_t>(pos.size() * dtype_size(step.outputs[o].dtype) * iters, 8));
    }
  }
};

}  // namespace

double Session::allreduce_max(double v) {
  cudaStream_t hs = rt_->harness_stream();
  DeviceBuffer buf(sizeof(double));
  CUDA_CHECK(cudaMemcpyAsync(buf.get(), &v, sizeof v, cudaMemcpyHostToDevice, hs));
  NCCL_CHECK(ncclAllReduce(buf.get(), buf.get(), 1, ncclFloat64, ncclMax, rt_->ctx()->comm, hs));
  CUDA_CHECK(cudaMemcpyAsync(&v, buf.get(), sizeof v, cudaMemcpyDeviceToHost, hs));
  CUDA_CHECK(cudaStreamSynchronize(hs));
  return v;
}

void Session::regenerate(TensorSet& set, uint64_t stream, CheckSlot* digest_slots) {
  for (size_t i = 0; i < step_->inputs.size(); ++i) {
    auto& d = step_->inputs[i];
    launch_generate(set.buffers[i].get(), d.dtype, d.numel(), d.dist, input_key(step_->seed, stream, plan_.rank, i, d.dist),
                    rt_->stream());
    if (digest_slots) launch_check(set.buffers[i].get(), d.dtype, d.numel(), 0, digest_slots + i, rt_->stream());
  }
}

/// Runs `probe` calls and returns the warm-up count every rank agrees on (from the slowest rank).
int Session::agree_on_warmup(std::vector<TensorSet>& groups, TensorSet& out, int probe) {
  const TimingPlan& tp = step_->timing;
  cudaStream_t s = rt_->stream();
  CUDA_CHECK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < probe; ++c) {
    rt_->barrier(s);
    call_run(groups[c % groups.size()], out);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  double per_call = allreduce_max(probe ? host_ms_since(t0) / probe : 0.0);
  if (per_call <= 0) return std::max(tp.warmup, probe);
  return std::clamp(static_cast<int>(tp.warmup_budget_ms / per_call), probe, std::max(tp.warmup, probe));
}

void Session::send_timing(const json& body, std::string samples) {
  json b = body;
  b["step"] = step_index_;
  send_message(fd_, {MsgKind::timing, std::move(b), std::move(samples)});
}

void Session::run_timing() {
  enter("timing");
  const TimingPlan& tp = step_->timing;
  const size_t n_in = step_->inputs.size(), n_out = step_->outputs.size();
  cudaStream_t s = rt_->stream();
  CallPlan cp;
  cp.groups = std::max(tp.groups, 2);
  cp.iters = tp.iters;
  std::vector<TensorSet> groups;
  for (int g = 0; g < cp.groups; ++g) groups.emplace_back(step_->inputs);
  TensorSet out(step_->outputs);

  // Probe a few calls to size the warm-up (the same count on every rank).
  int probe = std::min(tp.warmup, 5);
  cp.warmup = std::max(tp.warmup, probe);
  for (int g = 0; g < std::min(probe, cp.groups); ++g) regenerate(groups[g], cp.stream(g), nullptr);
  cp.warmup = agree_on_warmup(groups, out, probe);

  TimedChecks chk(*step_, plan_.rank, cp.iters, s);
  CheckSlot* in_gen = chk.in_gen.as<CheckSlot>();
  CheckSlot* in_after = chk.in_after.as<CheckSlot>();
  CheckSlot* out_slots = chk.out_slots.as<CheckSlot>();
  for (int g = 0; g < cp.groups; ++g) {
    // Group g holds the inputs of the first call c >= probe with c % G == g.
    int c = g;
    while (c < probe) c += cp.groups;
    int t = c - cp.warmup;
    if (c < cp.total()) regenerate(groups[g], cp.stream(c), t >= 0 ? in_gen + t * n_in : nullptr);
  }
  std::vector<Event> start(cp.iters), stop(cp.iters);
  int l2_resets = 0;
  auto one_call = [&](int c) {
    TensorSet& in = groups[c % cp.groups];
    int t = c - cp.warmup;
    if (clear_persisting_l2()) ++l2_resets;  // undo what the solution set
    uint64_t pcall = poison_bits(step_->seed, static_cast<uint64_t>(step_->trials + c));
    std::vector<uint64_t> poisons;
    for (size_t o = 0; o < n_out && tp.checks; ++o) {
      const TensorDesc& d = step_->outputs[o];
      poisons.push_back(poison_pattern(d.dtype, rng::mix64(pcall + o)));
      launch_fill_pattern(out.buffers[o].get(), dtype_size(d.dtype), d.numel(), poisons[o], s);
    }
    rt_->barrier(s, tp.predelay_us);
    if (t >= 0) CUDA_CHECK(cudaEventRecord(start[t].get(), s));
    call_run(in, out);
    if (t >= 0) CUDA_CHECK(cudaEventRecord(stop[t].get(), s));
    if (!tp.checks) return;  // measuring the cost of the checks themselves (--unchecked-timing)
    if (t >= 0) {
      for (size_t o = 0; o < n_out; ++o) {
        const TensorDesc& d = step_->outputs[o];
        size_t esz = dtype_size(d.dtype);
        launch_check(out.buffers[o].get(), d.dtype, d.numel(), poisons[o], out_slots + t * n_out + o, s);
        launch_gather_samples(out.buffers[o].get(), esz, chk.positions[o].as<uint64_t>(), chk.k[o],
                              chk.samples[o].as<char>() + static_cast<size_t>(t) * chk.k[o] * esz, s);
      }
      for (size_t i = 0; i < n_in; ++i)
        launch_check(in.buffers[i].get(), step_->inputs[i].dtype, step_->inputs[i].numel(), 0, in_after + t * n_in + i, s);
    }
    int next = c + cp.groups;
    if (next < cp.total()) regenerate(in, cp.stream(next), next - cp.warmup >= 0 ? in_gen + (next - cp.warmup) * n_in : nullptr);
  };

  CUDA_CHECK(cudaStreamSynchronize(s));
  auto host_start = std::chrono::steady_clock::now();
  for (int c = probe; c < cp.total(); ++c) {
    if (c == cp.warmup) {
      CUDA_CHECK(cudaStreamSynchronize(s));
      host_start = std::chrono::steady_clock::now();
    }
    one_call(c);
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw WorkerFailure(Status::runtime_error, std::string("during timed calls: CUDA error ") + cudaGetErrorName(e) + ": " +
                                                   cudaGetErrorString(e));
  double host_ms = host_ms_since(host_start);

  json times = json::array();
  for (int t = 0; t < cp.iters; ++t) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start[t].get(), stop[t].get()));
    times.push_back(ms);
  }
  float span = 0;
  if (cp.iters > 0) CUDA_CHECK(cudaEventElapsedTime(&span, start[0].get(), stop[cp.iters - 1].get()));

  std::vector<CheckSlot> hg(n_in * cp.iters), ha(n_in * cp.iters), ho(n_out * cp.iters);
  if (n_in) {
    CUDA_CHECK(cudaMemcpy(hg.data(), in_gen, hg.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ha.data(), in_after, ha.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
  }
  CUDA_CHECK(cudaMemcpy(ho.data(), out_slots, ho.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost));
  json outs = json::array(), ins = json::array();
  std::string blob;
  for (size_t o = 0; o < n_out; ++o) {
    json dig = json::array(), unw = json::array(), nf = json::array();
    for (int t = 0; t < cp.iters; ++t) {
      const CheckSlot& c = ho[t * n_out + o];
      dig.push_back(hex64(c.digest));
      unw.push_back(c.unwritten);
      nf.push_back(c.nonfinite);
    }
    outs.push_back({{"name", step_->outputs[o].name}, {"digests", dig}, {"unwritten", unw}, {"nonfinite", nf}, {"samples", chk.k[o]}});
    size_t bytes = static_cast<size_t>(chk.k[o]) * dtype_size(step_->outputs[o].dtype) * cp.iters;
    size_t off = blob.size();
    blob.resize(off + bytes);
    if (bytes) CUDA_CHECK(cudaMemcpy(blob.data() + off, chk.samples[o].get(), bytes, cudaMemcpyDeviceToHost));
  }
  for (size_t i = 0; i < n_in; ++i) {
    json gen = json::array(), after = json::array();
    for (int t = 0; t < cp.iters; ++t) {
      gen.push_back(hex64(hg[t * n_in + i].digest));
      after.push_back(hex64(ha[t * n_in + i].digest));
    }
    ins.push_back({{"name", step_->inputs[i].name}, {"gen", gen}, {"after", after}});
  }
  send_timing(json{{"mode", "eager"}, {"checked", tp.checks}, {"warmup", cp.warmup}, {"iters", cp.iters}, {"groups", cp.groups}, {"times_ms", times},
                   {"span_ms", span}, {"host_ms", host_ms}, {"l2_resets", l2_resets}, {"outputs", outs}, {"inputs", ins}},
              std::move(blob));
  if (tp.graph) run_graph_timing(groups, out);  // after the checked calls: the same solution, replayed
}

void Session::run_graph_timing(std::vector<TensorSet>& groups, TensorSet& out) {
  const TimingPlan& tp = step_->timing;
  cudaStream_t s = rt_->stream();
  CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < tp.iters; ++i) call_run(groups[i % groups.size()], out);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    throw;
  }
  cudaError_t ce = cudaStreamEndCapture(s, &graph);
  if (ce != cudaSuccess)
    throw WorkerFailure(Status::runtime_error, std::string("the solution cannot be captured in a CUDA graph (--graph): ") +
                                                   cudaGetErrorString(ce));
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (size_t o = 0; o < step_->outputs.size(); ++o) {
    const TensorDesc& d = step_->outputs[o];
    launch_fill_pattern(out.buffers[o].get(), dtype_size(d.dtype), d.numel(), poison_pattern(d.dtype, 0x5eed + o), s);
  }
  CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm replay
  Event start, stop;
  rt_->barrier(s, tp.predelay_us);
  auto host_start = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaEventRecord(start.get(), s));
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaEventRecord(stop.get(), s));
  cudaError_t e = cudaStreamSynchronize(s);
  double host_ms = host_ms_since(host_start);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess)
    throw WorkerFailure(Status::runtime_error, std::string("during graph replay: ") + cudaGetErrorString(e));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  DeviceBuffer slots(sizeof(CheckSlot) * std::max<size_t>(step_->outputs.size(), 1));
  CUDA_CHECK(cudaMemsetAsync(slots.get(), 0, slots.bytes(), s));
  for (size_t o = 0; o < step_->outputs.size(); ++o) {
    const TensorDesc& d = step_->outputs[o];
    launch_check(out.buffers[o].get(), d.dtype, d.numel(), poison_pattern(d.dtype, 0x5eed + o), slots.as<CheckSlot>() + o, s);
  }
  std::vector<CheckSlot> h(step_->outputs.size());
  CUDA_CHECK(cudaMemcpyAsync(h.data(), slots.get(), h.size() * sizeof(CheckSlot), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  json outs = json::array(), times = json::array();
  for (size_t o = 0; o < h.size(); ++o)
    outs.push_back({{"name", step_->outputs[o].name}, {"unwritten", h[o].unwritten}, {"nonfinite", h[o].nonfinite}});
  for (int i = 0; i < tp.iters; ++i) times.push_back(ms / tp.iters);  // a graph gives one interval: its mean
  send_timing(json{{"mode", "graph"}, {"warmup", 0}, {"iters", tp.iters}, {"groups", groups.size()}, {"times_ms", times},
                   {"span_ms", ms}, {"host_ms", host_ms}, {"outputs", outs}, {"inputs", json::array()}},
              {});
}

}  // namespace pkb::worker
