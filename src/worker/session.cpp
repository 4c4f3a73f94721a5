#include "worker/session.hpp"

#include <unistd.h>

#include <nccl.h>
#include <cstdio>

#include "core/cuda_check.hpp"
#include "core/hex.hpp"
#include "core/philox.hpp"
#include "core/poison.hpp"
#include "core/trial_param.hpp"
#include "worker/runner.hpp"

namespace pkb::worker {

using nlohmann::json;

std::string hex64(unsigned long long v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", v);
  return buf;
}

Session::Session(int fd, WorkerPlan plan, std::string exe) : fd_(fd), plan_(std::move(plan)), exe_(std::move(exe)) {}

Session::~Session() = default;

void Session::enter(const std::string& phase) {
  phase_ = phase;
  send_message(fd_, {MsgKind::phase, json{{"phase", phase}, {"step", step_index_}}, {}});
}

void Session::run() {
  if (plan_.oversubscribed) {
    // More ranks than GPUs (pkb --oversubscribe): rank r takes GPU r % visible, whatever the
    // launcher's local rank says (under mpirun it can exceed the GPUs of the host).
    int visible = 0;
    if (cudaGetDeviceCount(&visible) != cudaSuccess || visible < 1)
      throw WorkerFailure(Status::harness_error, "worker setup failed: no GPU is visible to this rank");
    plan_.device %= visible;
  }
  cudaDeviceProp prop{};
  int driver = 0, runtime = 0, nccl = 0;
  cudaGetDeviceProperties(&prop, plan_.device);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  l2_bytes_ = static_cast<size_t>(prop.l2CacheSize);
  send_message(fd_, {MsgKind::hello,
                     json{{"rank", plan_.rank},
                          {"device", plan_.device},
                          {"gpu", prop.name},
                          {"sm_count", prop.multiProcessorCount},
                          {"l2_bytes", prop.l2CacheSize},
                          {"memory_bytes", prop.totalGlobalMem},
                          {"cuda_driver", driver},
                          {"cuda_runtime", runtime},
                          {"nccl", nccl}},
                     {}});
  enter("setup");
  json ready;
  try {
    CUDA_CHECK(cudaSetDevice(plan_.device));
    hs_ = std::make_unique<Stream>();
    runner_ = std::make_unique<RunnerLink>(exe_, plan_.device, plan_.oversubscribed);
    runner_->on_failure([this](Status st, const std::string& message) {
      try {
        send_message(fd_,
                     {MsgKind::error, json{{"status", std::string(to_string(st))}, {"phase", phase_}, {"message", message}}, {}});
      } catch (...) {
        // The driver is gone; nothing more to say.
      }
      std::fflush(nullptr);
      _exit(1);  // no unwinding: see RunnerLink::on_failure
    });
    ready = runner_->call({{"op", "plan"}, {"plan", seal_for_runner(plan_)}});
    std::string h = from_hex(ready.at("event").get<std::string>());
    cudaIpcEventHandle_t handle;
    if (h.size() != sizeof handle) fail(Errc::protocol_error, "the runner's event handle has the wrong size");
    std::memcpy(&handle, h.data(), sizeof handle);
    CUDA_CHECK(cudaIpcOpenEventHandle(&returned_, handle));
  } catch (const Error& e) {
    throw WorkerFailure(Status::harness_error, std::string("worker setup failed: ") + e.what());
  } catch (const json::exception& e) {
    throw WorkerFailure(Status::harness_error, std::string("worker setup failed: ") + e.what());
  }
  enter("load");
  runner_->call({{"op", "load"}});
  runner_->loaded();
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) run_step(s);
  send_message(fd_, {MsgKind::done, json::object(), {}});
  enter("teardown");
  runner_->call({{"op", "teardown"}});
  runner_->wait_exit();
}

/// Allocates the step's tensor sets (two input sets, one output set) and passes them to the runner.
void Session::share_sets() {
  size_t g = SharedMapping::granularity(plan_.device);
  auto make = [&](int id, const std::vector<TensorDesc>& descs) {
    TensorSet s;
    s.id = id;
    s.layout = SetLayout::of(descs, g);
    s.mem = SharedMapping::create(plan_.device, s.layout.bytes);
    for (size_t i = 0; i < descs.size(); ++i) s.data.push_back(s.mem.base() + s.layout.offsets[i]);
    return s;
  };
  ins_.clear();
  ins_.push_back(make(0, step_->inputs));
  ins_.push_back(make(1, step_->inputs));
  out_ = make(2, step_->outputs);
  json sets = json::array();
  std::vector<int> fds;
  for (const TensorSet* s : {&ins_[0], &ins_[1], &out_}) {
    sets.push_back({{"id", s->id}, {"role", s == &out_ ? "out" : "in"}, {"bytes", s->layout.bytes}});
    fds.push_back(s->mem.export_fd());
  }
  try {
    runner_->call({{"op", "sets"}, {"step", step_index_}, {"sets", sets}}, fds);
  } catch (...) {
    for (int fd : fds) ::close(fd);
    throw;
  }
  for (int fd : fds) ::close(fd);
}

std::vector<long long> Session::call_params(const TensorSet& set) const {
  std::vector<long long> v;
  for (size_t k = 0; k < step_->trial_params.size(); ++k)
    v.push_back(trial_param_value(set.seed, set.stream, k, step_->trial_params[k]));
  return v;
}

RowLimit Session::row_limit(size_t o) const {
  const TensorDesc& d = step_->outputs[o];
  if (d.count_of < 0) return {};
  const auto c = static_cast<size_t>(d.count_of);  // a one-element int32/int64 output (the plan checks)
  return {out_.data[c], step_->outputs[c].dtype, static_cast<size_t>(d.shape[0]), d.row_elems()};
}

void Session::check_output(size_t o, uint64_t poison, CheckSlot* slot) {
  const TensorDesc& d = step_->outputs[o];
  launch_check(out_.data[o], d.dtype, d.numel(), poison, slot, hs_->get(), row_limit(o));
}

json Session::run_call(const TensorSet& in, json op, CheckSlot* at_return, const std::vector<uint64_t>& poisons) {
  op["op"] = "run";
  op["in"] = in.id;
  op["out"] = out_.id;
  op["params"] = call_params(in);
  json r = runner_->call(op);
  if (r.value("stage", std::string()) != "returned")
    throw WorkerFailure(Status::protocol_error, "the solution's process answered a call out of order");
  // Fingerprint at return: what the solution's stream had finished when pkb_run returned.
  if (at_return) {
    CUDA_CHECK(cudaStreamWaitEvent(hs_->get(), returned_, 0));
    for (size_t o = 0; o < step_->outputs.size(); ++o) check_output(o, poisons[o], at_return + o);
  }
  json f = runner_->receive();
  if (f.value("stage", std::string()) != "finished" || !f.contains("ms") || !f["ms"].is_number())
    throw WorkerFailure(Status::protocol_error, "the solution's process answered a call out of order");
  return f;
}

void Session::run_step(int s) {
  step_index_ = s;
  step_ = &plan_.steps[s];
  enter("init");
  share_sets();
  runner_->call({{"op", "step"}, {"step", s}});
  for (int t = 0; t < step_->trials; ++t) run_trial(t);
  if (step_->timing.enabled) run_timing();
  if (step_->profile_calls > 0) run_profile();
  enter("finalize");
  runner_->call({{"op", "finalize"}});
  ins_.clear();
  out_ = TensorSet{};
}

namespace {

json output_meta(const TensorDesc& d) {
  return json{{"name", d.name}, {"dtype", std::string(to_string(d.dtype))}, {"shape", d.shape}, {"bytes", d.bytes()}};
}

void copy_to_host(std::string& blob, const TensorSet& set, const std::vector<TensorDesc>& descs) {
  for (size_t i = 0; i < descs.size(); ++i) {
    size_t off = blob.size();
    blob.resize(off + descs[i].bytes());
    if (descs[i].bytes()) CUDA_CHECK(cudaMemcpy(blob.data() + off, set.data[i], descs[i].bytes(), cudaMemcpyDeviceToHost));
  }
}

}  // namespace

void Session::run_trial(int trial) {
  enter("trial " + std::to_string(trial));
  cudaStream_t hs = hs_->get();
  TensorSet& in = ins_[0];
  const size_t n_in = step_->inputs.size(), n_out = step_->outputs.size();
  DeviceBuffer slots(sizeof(CheckSlot) * (2 * n_in + 2 * n_out));
  CheckSlot* in_before = slots.as<CheckSlot>();
  CheckSlot* in_after = in_before + n_in;
  CheckSlot* out_return = in_after + n_in;
  CheckSlot* out_after = out_return + n_out;
  CUDA_CHECK(cudaMemsetAsync(slots.get(), 0, slots.bytes(), hs));
  uint64_t trial_seed = step_->trial_seeds.at(static_cast<size_t>(trial));
  uint64_t poison_call = poison_bits(trial_seed, static_cast<uint64_t>(trial));
  in.seed = trial_seed;
  in.stream = static_cast<uint64_t>(trial);
  for (size_t i = 0; i < n_in; ++i) {
    auto& d = step_->inputs[i];
    launch_generate(in.data[i], d.dtype, d.numel(), heldout_trial(static_cast<uint64_t>(trial)) ? held_out(d.dist) : d.dist,
                    input_key(trial_seed, static_cast<uint64_t>(trial), plan_.rank, i, d.dist), hs);
    launch_check(in.data[i], d.dtype, d.numel(), 0, in_before + i, hs);
  }
  std::vector<uint64_t> poisons;
  for (size_t o = 0; o < n_out; ++o) {
    auto& d = step_->outputs[o];
    poisons.push_back(poison_pattern(d.dtype, rng::mix64(poison_call + o)));
    launch_fill_pattern(out_.data[o], dtype_size(d.dtype), d.numel(), poisons.back(), hs);
  }
  CUDA_CHECK(cudaStreamSynchronize(hs));
  // The runner synchronizes its device and then every rank before it says the call finished.
  run_call(in, json{{"barrier_after", true}}, out_return, poisons);
  for (size_t o = 0; o < n_out; ++o) check_output(o, poisons[o], out_after + o);
  for (size_t i = 0; i < n_in; ++i)
    launch_check(in.data[i], step_->inputs[i].dtype, step_->inputs[i].numel(), 0, in_after + i, hs);
  std::vector<CheckSlot> host(2 * n_in + 2 * n_out);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), slots.get(), slots.bytes(), cudaMemcpyDeviceToHost, hs));
  CUDA_CHECK(cudaStreamSynchronize(hs));

  json outs = json::array(), ins = json::array();
  for (size_t o = 0; o < n_out; ++o) {
    json m = output_meta(step_->outputs[o]);
    const CheckSlot& r = host[2 * n_in + o];
    const CheckSlot& a = host[2 * n_in + n_out + o];
    m["digest_return"] = hex64(r.digest);
    m["digest_after"] = hex64(a.digest);
    m["unwritten"] = a.unwritten;
    m["nonfinite"] = a.nonfinite;
    m["poison"] = hex64(poisons[o]);
    outs.push_back(m);
  }
  for (size_t i = 0; i < n_in; ++i) {
    json m = output_meta(step_->inputs[i]);
    m["digest_before"] = hex64(host[i].digest);
    m["digest_after"] = hex64(host[n_in + i].digest);
    ins.push_back(m);
  }
  Message msg{MsgKind::trial, json{{"step", step_index_}, {"trial", trial}, {"outputs", outs}, {"inputs", ins}}, {}};
  copy_to_host(msg.blob, out_, step_->outputs);
  if (plan_.send_inputs) copy_to_host(msg.blob, in, step_->inputs);
  send_message(fd_, msg);
}

}  // namespace pkb::worker
