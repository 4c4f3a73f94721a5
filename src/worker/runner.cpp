#include "worker/runner.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "core/cuda_check.hpp"
#include "core/hex.hpp"
#include "proc/confine.hpp"
#include "proto/channel.hpp"
#include "proto/plan.hpp"
#include "worker/cupti.hpp"
#include "worker/resources.hpp"
#include "worker/runtime.hpp"
#include "worker/session.hpp"
#include "worker/shared_memory.hpp"

extern char** environ;

namespace pkb::worker {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// The runner

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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

void sync_or_fail(const char* during) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw WorkerFailure(Status::runtime_error,
                        std::string(during) + ": CUDA error " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

struct ImportedSet {
  SharedMapping mem;
  std::vector<pkb_tensor> views;
};

class Runner {
 public:
  Runner(int fd, int device) : fd_(fd), device_(device) {}

  /// The plan, the checker's first operation, already read (run_runner confined the process by it).
  void serve(WorkerPlan plan) {
    start(std::move(plan));
    while (true) {
      auto m = recv_message(fd_);
      if (!m) return;  // the checker is gone
      if (m->kind != MsgKind::op) throw WorkerFailure(Status::harness_error, "runner: expected an operation");
      const json& op = m->body;
      std::string what = op.at("op").get<std::string>();
      if (what == "load") load();
      else if (what == "sets") sets(op);
      else if (what == "step") step(op);
      else if (what == "run") run(op);
      else if (what == "barrier") barrier();
      else if (what == "warmup") warmup(op);
      else if (what == "span") span();
      else if (what == "graph") graph(op);
      else if (what == "profile_start") profile_start();
      else if (what == "profile_stop") profile_stop();
      else if (what == "finalize") finalize();
      else if (what == "teardown") {
        rt_->teardown();
        reply({});
        return;
      } else throw WorkerFailure(Status::harness_error, "runner: unknown operation " + what);
    }
  }

  bool loaded() const { return run_ != nullptr; }

 private:
  void reply(json body) {
    if (!body.is_object()) body = json::object();
    body["ok"] = true;
    send_message(fd_, {MsgKind::reply, std::move(body), {}});
  }

  void start(WorkerPlan plan) {
    plan_ = std::move(plan);
    plan_.device = device_;
    try {
      rt_ = std::make_unique<Runtime>(plan_);
    } catch (const Error& e) {
      throw WorkerFailure(Status::harness_error, std::string("worker setup failed: ") + e.what());
    }
    // The event the checker waits on before it fingerprints what a call had finished at return.
    CUDA_CHECK(cudaEventCreateWithFlags(&returned_, cudaEventInterprocess | cudaEventDisableTiming));
    cudaIpcEventHandle_t h;
    CUDA_CHECK(cudaIpcGetEventHandle(&h, returned_));
    reply({{"event", to_hex(std::string_view(reinterpret_cast<const char*>(&h), sizeof h))}});
  }

  void load() {
    so_ = dlopen(plan_.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!so_) {
      const char* e = dlerror();
      throw WorkerFailure(Status::load_error, std::string("cannot load the solution: ") + (e ? e : "unknown error"));
    }
    auto init = reinterpret_cast<pkb_init_fn>(dlsym(so_, "pkb_init"));
    auto run = reinterpret_cast<pkb_run_fn>(dlsym(so_, "pkb_run"));
    auto finalize = reinterpret_cast<pkb_finalize_fn>(dlsym(so_, "pkb_finalize"));
    std::string missing;
    if (!init) missing += " pkb_init";
    if (!run) missing += " pkb_run";
    if (!finalize) missing += " pkb_finalize";
    if (!missing.empty()) throw WorkerFailure(Status::load_error, "the solution does not define extern \"C\"" + missing);
    init_ = init;
    finalize_ = finalize;
    run_ = run;
    reply({});
  }

  void sets(const json& op) {
    step_ = &plan_.steps.at(op.at("step").get<size_t>());
    const json& list = op.at("sets");
    std::vector<int> fds = recv_fds(fd_, list.size());
    sets_.clear();
    size_t g = SharedMapping::granularity(device_);
    for (size_t i = 0; i < list.size(); ++i) {
      const json& d = list[i];
      bool input = d.at("role").get<std::string>() == "in";
      const auto& descs = input ? step_->inputs : step_->outputs;
      SetLayout layout = SetLayout::of(descs, g);
      if (layout.bytes != d.at("bytes").get<size_t>()) throw WorkerFailure(Status::harness_error, "runner: set layouts differ");
      bool writable = !input || std::any_of(descs.begin(), descs.end(), [](const TensorDesc& t) { return t.writable; });
      ImportedSet s{SharedMapping::import(device_, fds[i], layout.bytes, !writable), {}};
      s.views = views_of(s.mem, layout, descs);
      sets_.emplace(d.at("id").get<int>(), std::move(s));
    }
    json read_only = json::array();
    for (auto& [id, set] : sets_) read_only.push_back(set.mem.read_only());
    reply({{"read_only", read_only}});
  }

  void call_entry(const char* what, int rc) {
    std::string msg = rt_->take_error();
    cudaError_t async = cudaGetLastError();
    // A solution that gives up because this run cannot give it symmetric memory (--oversubscribe)
    // has not failed: its record says unsupported, and pass@k does not count it.
    if (rc != 0 && rt_->refused_symmetric_memory())
      throw WorkerFailure(Status::unsupported, std::string(what) + " returned " + std::to_string(rc) +
                                                   " after symmetric_alloc was refused: " + kOversubscribedSymmetric);
    if (rc != 0)
      throw WorkerFailure(Status::runtime_error,
                          std::string(what) + " returned " + std::to_string(rc) + (msg.empty() ? "" : ": " + msg));
    if (async != cudaSuccess)
      throw WorkerFailure(Status::runtime_error,
                          std::string(what) + ": CUDA error " + cudaGetErrorName(async) + ": " + cudaGetErrorString(async));
  }

  ImportedSet& set(const json& id) {
    auto it = sets_.find(id.get<int>());
    if (it == sets_.end()) throw WorkerFailure(Status::harness_error, "runner: no such tensor set");
    return it->second;
  }

  void call_run(ImportedSet& in, ImportedSet& out, const json& params) {
    rt_->set_call(params.get<std::vector<long long>>());
    call_entry("pkb_run", guarded("pkb_run", [&] {
                 return run_(rt_->ctx(), in.views.data(), static_cast<int>(in.views.size()), out.views.data(),
                             static_cast<int>(out.views.size()));
               }));
  }

  void step(const json& op) {
    step_ = &plan_.steps.at(op.at("step").get<size_t>());
    rt_->set_params(*step_);
    call_entry("pkb_init", guarded("pkb_init", [&] { return init_(rt_->ctx()); }));
    sync_or_fail("after pkb_init");
    reply({});
  }

  /// One call: [reset L2] barrier (+ GPU-side delay) [start] pkb_run [stop] -> "returned" -> device
  /// synchronize -> "finished" with the event time.
  void run(const json& op) {
    ImportedSet& in = set(op.at("in"));
    ImportedSet& out = set(op.at("out"));
    bool l2 = op.value("clear_l2", false) && clear_persisting_l2();
    cudaStream_t s = rt_->stream();
    rt_->barrier(s, op.value("delay_us", 0.0));
    int timed = op.value("timed", -1);  // index of a timed call, -1: not timed
    int profiled = recorder_ ? op.value("profile", -1) : -1;  // index of a profiled call (--profile)
    if (timed == 0) span_open_ = true;
    if (profiled >= 0) recorder_->mark(s, profiled);
    CUDA_CHECK(cudaEventRecord(start_.get(), s));
    if (timed == 0) CUDA_CHECK(cudaEventRecord(span_start_.get(), s));
    call_run(in, out, op.at("params"));
    CUDA_CHECK(cudaEventRecord(stop_.get(), s));
    if (profiled >= 0) recorder_->mark(s, profiled);
    if (timed >= 0) CUDA_CHECK(cudaEventRecord(span_stop_.get(), s));
    CUDA_CHECK(cudaEventRecord(returned_, s));
    send_message(fd_, {MsgKind::reply, json{{"ok", true}, {"stage", "returned"}}, {}});
    sync_or_fail("during pkb_run");
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    if (op.value("barrier_after", false)) {
      rt_->barrier(s);
      sync_or_fail("after pkb_run");
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    reply({{"stage", "finished"}, {"ms", ms}, {"l2_reset", l2}});
  }

  void barrier() {
    rt_->barrier(rt_->stream());
    sync_or_fail("in the barrier after a timed call");
    reply({});
  }

  /// Warm-up calls (neither timed nor checked): `probe` of them to size the rest, the count every
  /// rank agrees on (from the slowest rank), then the rest.
  void warmup(const json& op) {
    std::vector<ImportedSet*> ins;
    for (auto& id : op.at("sets")) ins.push_back(&set(id));
    ImportedSet& out = set(op.at("out"));
    const json& params = op.at("params");
    int probe = op.at("probe").get<int>(), most = op.at("warmup").get<int>();
    double budget = op.at("budget_ms").get<double>();
    cudaStream_t s = rt_->stream();
    CUDA_CHECK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < probe; ++c) {
      rt_->barrier(s);
      call_run(*ins[c % ins.size()], out, params[c % ins.size()]);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    double per_call = allreduce_max(probe ? ms_since(t0) / probe : 0.0);
    int warmup =
        per_call <= 0 ? std::max(most, probe) : std::clamp(static_cast<int>(budget / per_call), probe, std::max(most, probe));
    for (int c = probe; c < warmup; ++c) {
      rt_->barrier(s);
      call_run(*ins[c % ins.size()], out, params[c % ins.size()]);
    }
    sync_or_fail("during warm-up calls");
    reply({{"warmup", warmup}});
  }

  double allreduce_max(double v) {
    cudaStream_t s = rt_->harness_stream();
    DeviceBuffer buf(sizeof(double));
    CUDA_CHECK(cudaMemcpyAsync(buf.get(), &v, sizeof v, cudaMemcpyHostToDevice, s));
    NCCL_CHECK(ncclAllReduce(buf.get(), buf.get(), 1, ncclFloat64, ncclMax, rt_->ctx()->comm, s));
    CUDA_CHECK(cudaMemcpyAsync(&v, buf.get(), sizeof v, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return v;
  }

  void span() {
    float ms = 0;
    if (span_open_) CUDA_CHECK(cudaEventElapsedTime(&ms, span_start_.get(), span_stop_.get()));
    span_open_ = false;
    reply({{"span_ms", ms}});
  }

  /// Graph mode: one CUDA graph of `iters` calls back to back, replayed once warm and once timed.
  void graph(const json& op) {
    std::vector<ImportedSet*> ins;
    for (auto& id : op.at("sets")) ins.push_back(&set(id));
    ImportedSet& out = set(op.at("out"));
    const json& params = op.at("params");
    int iters = op.at("iters").get<int>();
    cudaStream_t s = rt_->stream();
    CUDA_CHECK(cudaStreamSynchronize(s));
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < iters; ++i) call_run(*ins[i % ins.size()], out, params[i % ins.size()]);
    } catch (...) {
      cudaStreamEndCapture(s, &graph);
      throw;
    }
    cudaError_t ce = cudaStreamEndCapture(s, &graph);
    if (ce != cudaSuccess)
      throw WorkerFailure(Status::runtime_error,
                          std::string("the solution cannot be captured in a CUDA graph (--graph): ") + cudaGetErrorString(ce));
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm replay
    rt_->barrier(s, op.value("delay_us", 0.0));
    auto t0 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaEventRecord(start_.get(), s));
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaEventRecord(stop_.get(), s));
    cudaError_t e = cudaStreamSynchronize(s);
    double host_ms = ms_since(t0);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
      throw WorkerFailure(Status::runtime_error, std::string("during graph replay: ") + cudaGetErrorString(e));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    reply({{"ms", ms}, {"host_ms", host_ms}});
  }

  /// --profile, after the timed phase: CUPTI starts recording (a machine without it says why, and the
  /// eval goes on); the calls that follow with a "profile" index are marked; profile_stop returns it.
  void profile_start() {
    sync_or_fail("before the profiled calls");
    try {
      recorder_ = std::make_unique<ActivityRecorder>();
    } catch (const Error& e) {
      reply({{"unavailable", e.what()}});
      return;
    }
    reply({});
  }

  void profile_stop() {
    sync_or_fail("after the profiled calls");
    if (!recorder_) {
      reply({{"unavailable", "the profile was not started"}});
      return;
    }
    std::unique_ptr<ActivityRecorder> r = std::move(recorder_);
    try {
      reply({{"activity", profile::to_json(r->finish(plan_.rank))}});
    } catch (const Error& e) {
      reply({{"unavailable", e.what()}});
    }
  }

  void finalize() {
    call_entry("pkb_finalize", guarded("pkb_finalize", [&] { return finalize_(rt_->ctx()); }));
    sync_or_fail("after pkb_finalize");
    sets_.clear();
    reply({});
  }

  int fd_, device_;
  WorkerPlan plan_;
  const StepPlan* step_ = nullptr;
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<ActivityRecorder> recorder_;  // between profile_start and profile_stop
  std::map<int, ImportedSet> sets_;
  cudaEvent_t returned_ = nullptr;
  Event start_, stop_, span_start_, span_stop_;
  bool span_open_ = false;
  void* so_ = nullptr;
  pkb_init_fn init_ = nullptr;
  pkb_run_fn run_ = nullptr;
  pkb_finalize_fn finalize_ = nullptr;
};

void report_failure(int fd, Status status, const std::string& message) {
  try {
    send_message(fd, {MsgKind::reply, json{{"error", {{"status", std::string(to_string(status))}, {"message", message}}}}, {}});
  } catch (...) {
    // The checker is gone.
  }
}

/// The runner's confinement (WorkerPlan::confine), applied while the process has one thread, before
/// CUDA, NCCL or the solution start any: so it covers every thread and child.
void confine_runner(const WorkerPlan& plan) {
  if (!plan.confine.enabled) return;
  confine::Policy policy = confine::policy_of(plan.confine.hidden, plan.confine.writable);
  policy.readable_files = {plan.so_path};
  confine::apply(policy);
}

}  // namespace

int run_runner(int fd, int device) {
  signal(SIGPIPE, SIG_IGN);
  WorkerPlan plan;
  try {
    auto m = recv_message(fd);
    if (!m) return 0;  // the checker is gone
    if (m->kind != MsgKind::op || m->body.value("op", std::string()) != "plan")
      throw WorkerFailure(Status::harness_error, "runner: expected the plan first");
    plan = m->body.at("plan").get<WorkerPlan>();
  } catch (const WorkerFailure& f) {
    report_failure(fd, f.status, f.what());
    return 1;
  } catch (const std::exception& e) {
    report_failure(fd, Status::harness_error, std::string("runner: a malformed plan: ") + e.what());
    return 1;
  }
  try {
    confine_runner(plan);
  } catch (const std::exception& e) {
    report_failure(fd, Status::harness_error,
                   std::string("cannot confine the solution's process (PKB_SANDBOX=off runs it unconfined): ") + e.what());
    return 1;
  }
  // Events and streams need the device first: Runner's members are created after it is current.
  if (cudaSetDevice(device) != cudaSuccess) {
    report_failure(fd, Status::harness_error, "worker setup failed: cannot use GPU " + std::to_string(device));
    return 1;
  }
  std::unique_ptr<Runner> r;
  try {
    r = std::make_unique<Runner>(fd, device);
    r->serve(std::move(plan));
  } catch (const WorkerFailure& f) {
    report_failure(fd, f.status, f.what());
    std::fflush(nullptr);
    _exit(1);  // skip teardown: peers may be stuck; the driver tears the job down
  } catch (const std::exception& e) {
    // Once the solution is loaded it shares this process: whatever breaks here is charged to it.
    report_failure(fd, r && r->loaded() ? Status::runtime_error : Status::harness_error, std::string("runner: ") + e.what());
    std::fflush(nullptr);
    _exit(1);
  } catch (...) {
    report_failure(fd, r && r->loaded() ? Status::runtime_error : Status::harness_error, "runner: a non-standard exception");
    std::fflush(nullptr);
    _exit(1);
  }
  std::fflush(nullptr);
  _exit(0);
}

// ---------------------------------------------------------------------------------------------
// The checker's end

RunnerLink::RunnerLink(const std::string& exe, int device, bool oversubscribed) : oversubscribed_(oversubscribed) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    fail(Errc::io_error, std::string("socketpair: ") + std::strerror(errno));
  std::string dev = std::to_string(device);
  // The solution's process starts without credentials the driver's environment holds (an LLM
  // provider's API key, say). Built before fork: the child may only exec.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    if (!confine::secret_env_name(kv.substr(0, kv.find('=')))) env.push_back(*e);
  }
  env.push_back(nullptr);
  const char* argv[] = {"pkb-worker", "--runner-fd", "3", "--device", dev.c_str(), nullptr};
  pid_ = ::fork();
  if (pid_ < 0) fail(Errc::io_error, std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::dup2(sv[1], 3);  // dup2 clears close-on-exec on fd 3; every other descriptor closes at exec
    ::execve(exe.c_str(), const_cast<char* const*>(argv), env.data());
    _exit(127);
  }
  ::close(sv[1]);
  fd_ = sv[0];
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));  // -1 on kernels before 5.3: EOF only
}

RunnerLink::~RunnerLink() {
  if (fd_ >= 0) ::close(fd_);
  if (pidfd_ >= 0) ::close(pidfd_);
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void RunnerLink::send(const json& op, const std::vector<int>& fds) {
  try {
    send_message(fd_, {MsgKind::op, op, {}});
    send_fds(fd_, fds);
  } catch (const Error& e) {
    died(std::string("its channel broke: ") + e.what());
  }
}

json RunnerLink::receive() {
  if (!wait_readable_or_exit(fd_, pidfd_)) died("it exited");
  std::optional<Message> m;
  try {
    m = recv_message(fd_);
  } catch (const Error& e) {
    failed(Status::protocol_error, std::string("the solution's process broke its channel to the checker: ") + e.what());
  }
  if (!m) died("it closed its channel");
  if (m->kind != MsgKind::reply)
    failed(Status::protocol_error,
           "the solution's process sent a '" + std::string(to_string(m->kind)) + "' message on its channel to the checker");
  if (m->body.contains("error")) {
    const json& e = m->body["error"];
    std::string st = e.is_object() ? e.value("status", std::string()) : std::string();
    std::string msg = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
    auto s = parse_status(st);
    if (!s || !runner_may_report(*s, loaded_, oversubscribed_))
      failed(Status::protocol_error, "the solution's process reported status '" + st + "', which it may not claim: " + msg);
    failed(*s, msg);
  }
  if (!m->body.value("ok", false)) failed(Status::protocol_error, "the solution's process sent a malformed reply");
  return std::move(m->body);
}

void RunnerLink::died(const std::string& how) {
  // A closed channel comes a moment before the exit status; a process that closes its channel and
  // lives on is killed (it broke the protocol).
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 200 && (r = ::waitpid(pid_, &status, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (r == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    failed(Status::protocol_error, "the solution's process " + how + " but did not exit");
  }
  exited_ = true;
  std::fflush(nullptr);
  // Die as the runner died: the driver reads the rank's exit as before the split.
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

void RunnerLink::failed(Status s, const std::string& message) {
  if (on_failure_) on_failure_(s, message);
  throw WorkerFailure(s, message);
}

void RunnerLink::wait_exit() {
  int status = 0;
  if (!exited_ && pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) exited_ = true;
}

}  // namespace pkb::worker
