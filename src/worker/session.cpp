#include "worker/session.hpp"

#include <dlfcn.h>

#include <cstdio>

#include "core/cuda_check.hpp"
#include "core/philox.hpp"
#include "core/poison.hpp"

namespace pkb::worker {

using nlohmann::json;

std::string hex64(unsigned long long v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", v);
  return buf;
}

TensorSet::TensorSet(const std::vector<TensorDesc>& descs) {
  for (auto& d : descs) {
    buffers.emplace_back(std::max<size_t>(d.bytes(), 256));
    pkb_tensor t{};
    t.data = buffers.back().get();
    t.dtype = static_cast<pkb_dtype>(d.dtype);
    t.ndim = static_cast<int>(d.shape.size());
    for (size_t i = 0; i < d.shape.size(); ++i) t.shape[i] = d.shape[i];
    t.name = d.name.c_str();
    views.push_back(t);
  }
}

Session::Session(int fd, WorkerPlan plan) : fd_(fd), plan_(std::move(plan)) {}

void Session::enter(const std::string& phase) {
  phase_ = phase;
  send_message(fd_, {MsgKind::phase, json{{"phase", phase}, {"step", step_index_}}, {}});
}

/// Calls one of the solution's entry points. A C++ exception thrown out of it (the ABI is C: a
/// solution must not throw, but a plain std::vector::at does) is the solution's runtime_error.
template <typename F>
int guarded(const char* what, F&& entry) {
  try {
    return entry();
  } catch (const std::exception& e) {
    throw WorkerFailure(Status::runtime_error, std::string(what) + " threw an exception out of the C ABI: " + e.what());
  } catch (...) {
    throw WorkerFailure(Status::runtime_error, std::string(what) + " threw a non-standard exception out of the C ABI");
  }
}

void Session::call_run(TensorSet& in, TensorSet& out) {
  rt_->set_call(in.seed, in.stream);  // per-call parameters follow the inputs (core/trial_param.hpp)
  call_entry("pkb_run", guarded("pkb_run", [&] {
               return run_(rt_->ctx(), in.views.data(), static_cast<int>(in.views.size()), out.views.data(),
                           static_cast<int>(out.views.size()));
             }));
}

void Session::call_entry(const char* what, int rc) {
  std::string msg = rt_->take_error();
  cudaError_t async = cudaGetLastError();
  // A solution that gives up because this run cannot give it symmetric memory (--oversubscribe)
  // has not failed: its record says unsupported, and pass@k does not count it.
  if (rc != 0 && rt_->refused_symmetric_memory())
    throw WorkerFailure(Status::unsupported, std::string(what) + " returned " + std::to_string(rc) +
                                                 " after symmetric_alloc was refused: " + kOversubscribedSymmetric);
  if (rc != 0)
    throw WorkerFailure(Status::runtime_error, std::string(what) + " returned " + std::to_string(rc) +
                                                   (msg.empty() ? "" : ": " + msg));
  if (async != cudaSuccess)
    throw WorkerFailure(Status::runtime_error, std::string(what) + ": CUDA error " + cudaGetErrorName(async) + ": " +
                                                   cudaGetErrorString(async));
}

void Session::load_solution() {
  so_ = dlopen(plan_.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so_) {
    const char* e = dlerror();
    throw WorkerFailure(Status::load_error, std::string("cannot load the solution: ") + (e ? e : "unknown error"));
  }
  init_ = reinterpret_cast<pkb_init_fn>(dlsym(so_, "pkb_init"));
  run_ = reinterpret_cast<pkb_run_fn>(dlsym(so_, "pkb_run"));
  finalize_ = reinterpret_cast<pkb_finalize_fn>(dlsym(so_, "pkb_finalize"));
  std::string missing;
  if (!init_) missing += " pkb_init";
  if (!run_) missing += " pkb_run";
  if (!finalize_) missing += " pkb_finalize";
  if (!missing.empty())
    throw WorkerFailure(Status::load_error, "the solution does not define extern \"C\"" + missing);
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
  try {
    rt_ = std::make_unique<Runtime>(plan_);
  } catch (const Error& e) {
    throw WorkerFailure(Status::harness_error, std::string("worker setup failed: ") + e.what());
  }
  enter("load");
  load_solution();
  // The solution's code stays mapped until exit: unloading it while its kernels, static
  // destructors or threads might still run is never safe.
  for (int s = 0; s < static_cast<int>(plan_.steps.size()); ++s) run_step(s);
  send_message(fd_, {MsgKind::done, json::object(), {}});
  enter("teardown");
  rt_->teardown();
}

void Session::run_step(int s) {
  step_index_ = s;
  step_ = &plan_.steps[s];
  rt_->set_params(*step_);
  enter("init");
  call_entry("pkb_init", guarded("pkb_init", [&] { return init_(rt_->ctx()); }));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int t = 0; t < step_->trials; ++t) run_trial(t);
  if (step_->timing.enabled) run_timing();
  enter("finalize");
  call_entry("pkb_finalize", guarded("pkb_finalize", [&] { return finalize_(rt_->ctx()); }));
  CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

json output_meta(const TensorDesc& d) {
  return json{{"name", d.name}, {"dtype", std::string(to_string(d.dtype))}, {"shape", d.shape}, {"bytes", d.bytes()}};
}

void copy_to_host(std::string& blob, const TensorSet& set, const std::vector<TensorDesc>& descs) {
  for (size_t i = 0; i < descs.size(); ++i) {
    size_t off = blob.size();
    blob.resize(off + descs[i].bytes());
    if (descs[i].bytes())
      CUDA_CHECK(cudaMemcpy(blob.data() + off, set.buffers[i].get(), descs[i].bytes(), cudaMemcpyDeviceToHost));
  }
}

}  // namespace

void Session::run_trial(int trial) {
  enter("trial " + std::to_string(trial));
  cudaStream_t hs = rt_->harness_stream();
  TensorSet in(step_->inputs), out(step_->outputs);
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
    launch_generate(in.buffers[i].get(), d.dtype, d.numel(), heldout_trial(static_cast<uint64_t>(trial)) ? held_out(d.dist) : d.dist,
                    input_key(trial_seed, static_cast<uint64_t>(trial), plan_.rank, i, d.dist), hs);
    launch_check(in.buffers[i].get(), d.dtype, d.numel(), 0, in_before + i, hs);
  }
  std::vector<uint64_t> poisons;
  for (size_t o = 0; o < n_out; ++o) {
    auto& d = step_->outputs[o];
    poisons.push_back(poison_pattern(d.dtype, rng::mix64(poison_call + o)));
    launch_fill_pattern(out.buffers[o].get(), dtype_size(d.dtype), d.numel(), poisons.back(), hs);
  }
  CUDA_CHECK(cudaStreamSynchronize(hs));
  rt_->barrier(rt_->stream());
  call_run(in, out);
  // Fingerprint at return, on the solution's stream: what the call had finished when it returned.
  for (size_t o = 0; o < n_out; ++o)
    launch_check(out.buffers[o].get(), step_->outputs[o].dtype, step_->outputs[o].numel(), poisons[o], out_return + o,
                 rt_->stream());
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw WorkerFailure(Status::runtime_error, std::string("during pkb_run: CUDA error ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  // Every rank has finished everything: fingerprint again.
  rt_->barrier(hs);
  for (size_t o = 0; o < n_out; ++o)
    launch_check(out.buffers[o].get(), step_->outputs[o].dtype, step_->outputs[o].numel(), poisons[o], out_after + o, hs);
  for (size_t i = 0; i < n_in; ++i)
    launch_check(in.buffers[i].get(), step_->inputs[i].dtype, step_->inputs[i].numel(), 0, in_after + i, hs);
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
  copy_to_host(msg.blob, out, step_->outputs);
  if (plan_.send_inputs) copy_to_host(msg.blob, in, step_->inputs);
  send_message(fd_, msg);
}

}  // namespace pkb::worker
