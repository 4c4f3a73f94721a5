// The timed phase of a worker: warm-up, then timed calls, each with fresh inputs and a full check
// of its outputs. Per call, on the solution's stream:
//   poison outputs -> barrier over all ranks + GPU-side delay -> [start] pkb_run [stop]
//   -> check outputs (digest, unwritten, non-finite) and gather samples -> check inputs
//   -> regenerate this input group for the call G ahead.
// Only pkb_run sits between the two events. Input groups rotate so that the working set exceeds
// L2 (cold-cache conditions); regeneration gives every call inputs no earlier call saw.
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
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    auto& d = plan_.inputs[i];
    launch_generate(set.buffers[i].get(), d.dtype, d.numel(), d.dist, rng::tensor_key(plan_.seed, stream, plan_.rank, i),
                    rt_->stream());
    if (digest_slots) launch_check(set.buffers[i].get(), d.dtype, d.numel(), 0, digest_slots + i, rt_->stream());
  }
}

void Session::run_timing() {
  enter("timing");
  const TimingPlan& tp = plan_.timing;
  const size_t n_in = plan_.inputs.size(), n_out = plan_.outputs.size();
  cudaStream_t s = rt_->stream();
  CallPlan cp;
  cp.groups = std::max(tp.groups, 2);
  cp.iters = tp.iters;
  std::vector<TensorSet> groups;
  for (int g = 0; g < cp.groups; ++g) groups.emplace_back(plan_.inputs);
  TensorSet out(plan_.outputs);

  // Check slots: per timed call, inputs at generation and after the call, outputs after the call.
  DeviceBuffer in_gen(sizeof(CheckSlot) * n_in * cp.iters), in_after(sizeof(CheckSlot) * n_in * cp.iters),
      out_slots(sizeof(CheckSlot) * n_out * cp.iters);
  for (auto* b : {&in_gen, &in_after, &out_slots}) CUDA_CHECK(cudaMemsetAsync(b->get(), 0, b->bytes(), s));
  std::vector<DeviceBuffer> positions, samples;
  std::vector<int> k_per_out;
  for (size_t o = 0; o < n_out; ++o) {
    auto pos = sample_positions(plan_.seed, plan_.rank, static_cast<int>(o), plan_.outputs[o].numel(), tp.samples_per_output);
    k_per_out.push_back(static_cast<int>(pos.size()));
    positions.emplace_back(std::max<size_t>(pos.size() * sizeof(uint64_t), 8));
    CUDA_CHECK(cudaMemcpy(positions.back().get(), pos.data(), pos.size() * sizeof(uint64_t), cudaMemcpyHostToDevice));
    samples.emplace_back(std::max<size_t>(pos.size() * dtype_size(plan_.outputs[o].dtype) * cp.iters, 8));
  }
  std::vector<Event> start(cp.iters), stop(cp.iters);

  auto timed_index = [&](int c) { return c - cp.warmup; };
  auto one_call = [&](int c) {
    TensorSet& in = groups[c % cp.groups];
    int t = timed_index(c);
    uint64_t pcall = poison_bits(plan_.seed, static_cast<uint64_t>(plan_.trials + c));
    std::vector<uint64_t> poisons;
    for (size_t o = 0; o < n_out; ++o) {
      poisons.push_back(poison_pattern(plan_.outputs[o].dtype, rng::mix64(pcall + o)));
      launch_fill_pattern(out.buffers[o].get(), dtype_size(plan_.outputs[o].dtype), plan_.outputs[o].numel(), poisons[o], s);
    }
    rt_->barrier(s, tp.predelay_us);
    if (t >= 0) CUDA_CHECK(cudaEventRecord(start[t].get(), s));
    call_entry("pkb_run", run_(rt_->ctx(), in.views.data(), static_cast<int>(n_in), out.views.data(), static_cast<int>(n_out)));
    if (t >= 0) {
      CUDA_CHECK(cudaEventRecord(stop[t].get(), s));
      for (size_t o = 0; o < n_out; ++o) {
        auto& d = plan_.outputs[o];
        launch_check(out.buffers[o].get(), d.dtype, d.numel(), poisons[o], out_slots.as<CheckSlot>() + t * n_out + o, s);
        size_t esz = dtype_size(d.dtype);
        launch_gather_samples(out.buffers[o].get(), esz, positions[o].as<uint64_t>(), k_per_out[o],
                              samples[o].as<char>() + static_cast<size_t>(t) * k_per_out[o] * esz, s);
      }
      for (size_t i = 0; i < n_in; ++i)
        launch_check(in.buffers[i].get(), plan_.inputs[i].dtype, plan_.inputs[i].numel(), 0,
                     in_after.as<CheckSlot>() + t * n_in + i, s);
    }
    int next = c + cp.groups;
    if (next < cp.total()) {
      int nt = timed_index(next);
      regenerate(in, cp.stream(next), nt >= 0 ? in_gen.as<CheckSlot>() + nt * n_in : nullptr);
    }
  };

  // Probe a few calls to size the warm-up (same count on every rank), then fill the groups.
  int probe = std::min(tp.warmup, 5);
  cp.warmup = std::max(tp.warmup, probe);
  for (int g = 0; g < std::min(probe, cp.groups); ++g) regenerate(groups[g], cp.stream(g), nullptr);
  CUDA_CHECK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < probe; ++c) {
    TensorSet& in = groups[c % cp.groups];
    rt_->barrier(s);
    call_entry("pkb_run", run_(rt_->ctx(), in.views.data(), static_cast<int>(n_in), out.views.data(), static_cast<int>(n_out)));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  double per_call = allreduce_max(probe ? host_ms_since(t0) / probe : 0.0);
  if (per_call > 0)
    cp.warmup = std::clamp(static_cast<int>(tp.warmup_budget_ms / per_call), probe, std::max(tp.warmup, probe));
  for (int g = 0; g < cp.groups; ++g) {
    // Group g holds the inputs of the first call c >= probe with c % G == g.
    int c = g;
    while (c < probe) c += cp.groups;
    int t = timed_index(c);
    if (c < cp.total()) regenerate(groups[g], cp.stream(c), t >= 0 ? in_gen.as<CheckSlot>() + t * n_in : nullptr);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));

  auto host_start = std::chrono::steady_clock::time_point{};
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
    CUDA_CHECK(cudaMemcpy(hg.data(), in_gen.get(), in_gen.bytes(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ha.data(), in_after.get(), in_after.bytes(), cudaMemcpyDeviceToHost));
  }
  CUDA_CHECK(cudaMemcpy(ho.data(), out_slots.get(), out_slots.bytes(), cudaMemcpyDeviceToHost));
  json outs = json::array(), ins = json::array();
  Message msg{MsgKind::timing, {}, {}};
  for (size_t o = 0; o < n_out; ++o) {
    json dig = json::array(), unw = json::array(), nf = json::array();
    for (int t = 0; t < cp.iters; ++t) {
      const CheckSlot& c = ho[t * n_out + o];
      dig.push_back(hex64(c.digest));
      unw.push_back(c.unwritten);
      nf.push_back(c.nonfinite);
    }
    outs.push_back({{"name", plan_.outputs[o].name}, {"digests", dig}, {"unwritten", unw}, {"nonfinite", nf},
                    {"samples", k_per_out[o]}});
    size_t bytes = static_cast<size_t>(k_per_out[o]) * dtype_size(plan_.outputs[o].dtype) * cp.iters;
    size_t off = msg.blob.size();
    msg.blob.resize(off + bytes);
    if (bytes) CUDA_CHECK(cudaMemcpy(msg.blob.data() + off, samples[o].get(), bytes, cudaMemcpyDeviceToHost));
  }
  for (size_t i = 0; i < n_in; ++i) {
    json gen = json::array(), after = json::array();
    for (int t = 0; t < cp.iters; ++t) {
      gen.push_back(hex64(hg[t * n_in + i].digest));
      after.push_back(hex64(ha[t * n_in + i].digest));
    }
    ins.push_back({{"name", plan_.inputs[i].name}, {"gen", gen}, {"after", after}});
  }
  msg.body = json{{"warmup", cp.warmup}, {"iters", cp.iters}, {"groups", cp.groups}, {"times_ms", times},
                  {"span_ms", span}, {"host_ms", host_ms}, {"outputs", outs}, {"inputs", ins}};
  send_message(fd_, msg);
}

}  // namespace pkb::worker
