#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/interrupt.hpp"
#include "eval/internal.hpp"
#include "eval/profile_out.hpp"
#include "proc/confine.hpp"
#include "proc/netns.hpp"
#include "report/record_mac.hpp"
#include "roofline/roofline.hpp"
#include "spec/oracle.hpp"
#include "spec/registry.hpp"

namespace pkb {

namespace detail {

namespace {

uint64_t secret_seed() {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, 0) != sizeof s) fail(Errc::io_error, "getrandom failed: cannot draw a secret seed");
  return s;
}

bool is_reference_word(const std::string& s) { return s == "reference" || s == "baseline"; }

}  // namespace

}  // namespace detail

Placement place_ranks(int world, int visible, bool oversubscribe) {
  if (visible < 1) fail(Errc::invalid_argument, "no GPU is visible");
  if (world > visible && !oversubscribe)
    fail(Errc::invalid_argument, "--gpus " + std::to_string(world) + " but only " + std::to_string(visible) +
                                     " GPU(s) are visible; add --oversubscribe to run " + std::to_string(world) +
                                     " ranks on them (verdicts only: timings are then not performance)");
  return Placement{std::min(world, visible), world};
}

namespace detail {

void check_eval_options(const EvalOptions& opts) {
  if (!opts.solution.empty() && !is_reference_word(opts.solution)) {
    std::filesystem::path path = opts.solution;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(Errc::invalid_argument, "solution file " + opts.solution + " does not exist");
    if (!std::filesystem::is_regular_file(path, ec) || access(path.c_str(), R_OK) != 0)
      fail(Errc::invalid_argument, "solution file " + opts.solution + " is not a readable file");
  }
  require_dtype_name(opts.dtype);
  if (opts.trials < 1) fail(Errc::invalid_argument, "--trials must be at least 1");
  if (opts.iters < 1 && opts.perf) fail(Errc::invalid_argument, "--iters must be at least 1");
  if (opts.warmup < 0) fail(Errc::invalid_argument, "--warmup cannot be negative");
  if (opts.timeout_s <= 0) fail(Errc::invalid_argument, "--timeout must be positive");
  if (!opts.profile_dir.empty()) {
    if (opts.interleave > 0 && opts.perf)
      fail(Errc::invalid_argument,
           "--profile does not go with --interleave: both jobs would be profiled at once on the same GPUs");
    check_profile_dir(opts.profile_dir);
  }
}

Prepared prepare(const EvalOptions& opts, const std::vector<std::string>& size_classes,
                 const std::function<void(const Spec&)>& check) {
  Prepared p;
  auto all = discover_problems(problems_dir(opts.problems_dir));
  const ProblemEntry& entry = find_problem(all, opts.problem);
  p.spec = load_spec(entry.dir);
  check_eval_options(opts);
  p.solution_is_reference = opts.solution.empty() || is_reference_word(opts.solution);
  p.solution_path = p.solution_is_reference ? p.spec.reference_path() : std::filesystem::path(opts.solution);
  const DType dtype = p.spec.dtype_or_default(opts.dtype);
  if (!opts.size.empty()) p.spec.require_size(opts.size);
  p.spec.require_overrides({opts.size, opts.size_overrides});
  p.spec.require_dtype(dtype);
  if (opts.gpus > 0) p.spec.require_world(opts.gpus);
  for (auto& name : size_classes)
    if (name != "all") p.spec.require_size(name);
  if (check) check(p.spec);
  p.sys = probe_system();
  if (p.sys.gpu_count == 0)
    fail(Errc::invalid_argument, "no GPU is visible (" + p.sys.error + "); pkb run/eval need 2 or more NVLink GPUs");
  int world = world_for_run(opts.gpus, p.sys.gpu_count, p.spec.min_world, opts.oversubscribe);
  p.placement = place_ranks(world, p.sys.gpu_count, opts.oversubscribe);
  SizeChoice sc{opts.size, opts.size_overrides};
  p.inst = resolve(p.spec, world, sc, dtype);
  override_tolerance(p.inst, opts.atol, opts.rtol);
  p.seed = opts.seed ? *opts.seed : secret_seed();
  p.calibration = load_calibration(p.sys.gpu_name, p.sys.gpu_count, p.sys.nvidia_driver);
  return p;
}

EvalRecord start_record(const EvalOptions& opts, const Prepared& p, const Instance& inst, const char* kind) {
  EvalRecord r;
  r.kind = kind;
  r.timestamp = now_iso8601();
  r.argv = opts.argv;
  r.label = opts.label;
  r.problem_id = p.spec.id;
  r.problem_stem = p.spec.stem;
  r.problem_name = p.spec.name;
  r.spec_hash = p.spec.hash;
  r.world = inst.world;
  r.dtype = std::string(to_string(inst.dtype));
  r.size_name = inst.size_name;
  for (auto& [k, v] : inst.vars)
    if (k != "e") r.params[k] = v;
  r.trials = opts.trials;
  r.atol = inst.tolerance.atol;
  r.rtol = inst.tolerance.rtol;
  r.oversubscribed = p.placement.oversubscribed();
  r.ranks_per_gpu = p.placement.ranks_per_gpu();
  r.gpus_used = p.placement.gpus;
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(p.seed));
  r.seed = buf;
  r.system = {{"gpu", p.sys.gpu_name},
              {"gpu_count", p.sys.gpu_count},
              {"nvidia_driver", p.sys.nvidia_driver},
              {"cuda_driver", cuda_version_string(p.sys.cuda_driver)},
              {"cuda_runtime", cuda_version_string(p.sys.cuda_runtime)},
              {"nccl", nccl_version_string(p.sys.nccl)},
              {"hostname", p.sys.hostname}};
  return r;
}

bool compile_side(const EvalOptions& opts, const std::filesystem::path& src, SideInfo& side, EvalRecord& rec,
                  std::string& so_path, bool is_baseline) {
  side.path = src.string();
  side.sha256 = sha256_hex(read_file(src));
  if (opts.progress) std::fprintf(stderr, "\r\033[K[pkb] compiling %s ...", side.label.c_str());
  CompileResult cr = compile_solution(src, opts.compile);
  side.compile_cached = cr.cached;
  side.compile_s = cr.seconds;
  so_path = cr.so_path.string();
  Status failure = Status::ok;
  std::string message;
  if (!cr.ok) {
    failure = Status::compile_error;
    message = cr.timed_out ? "nvcc ran past its " + std::to_string(opts.compile.timeout.count()) + " s deadline"
                           : "nvcc rejected " + src.filename().string();
  } else if (!cr.missing_entry_points.empty()) {
    failure = Status::load_error;
    message = "the solution does not define extern \"C\"";
    for (auto& m : cr.missing_entry_points) message += " " + m;
  }
  if (failure == Status::ok) return true;
  rec.status = is_baseline ? Status::harness_error : failure;
  rec.message = is_baseline ? "the baseline does not build: " + message : message;
  rec.compile_log = cr.log;
  return false;
}

TimingPlan timing_plan(const EvalOptions& opts, const Prepared&, const Instance&, bool enabled) {
  TimingPlan tp;
  tp.enabled = enabled;
  tp.warmup = opts.warmup;
  tp.iters = opts.iters;
  tp.groups = 2;  // two input sets alternate; cold caches come from the flush after generation (worker/timing.cpp)
  return tp;
}

namespace {

StepPlan step_plan(const Step& st, const RankPlan& rp) {
  StepPlan sp;
  sp.name = st.name;
  for (auto& t : rp.inputs) sp.inputs.push_back({t.name, t.dtype, t.shape, t.dist, t.mutable_});
  for (auto& t : rp.outputs) sp.outputs.push_back({t.name, t.dtype, t.shape, {}, false, t.count_of});
  sp.params = st.inst->int_params();
  sp.float_params = st.inst->float_params;
  sp.trial_params = st.inst->trial_params;
  sp.seed = st.seed;
  sp.trials = st.trials;
  sp.timing = st.timing;
  sp.profile_calls = st.profile_calls;
  return sp;
}

}  // namespace

std::vector<WorkerPlan> make_plans(const Prepared& p, const std::vector<Step>& steps, const std::string& so_path,
                                   const std::string& role, bool send_inputs) {
  const Instance& first = *steps.at(0).inst;
  std::vector<WorkerPlan> plans;
  for (auto& rp : first.ranks) {
    WorkerPlan w;
    w.role = role;
    w.problem = p.spec.stem;
    w.world = first.world;
    w.rank = rp.rank;
    w.device = p.placement.device_of(rp.rank);
    w.oversubscribed = p.placement.oversubscribed();
    w.dtype = first.dtype;
    w.so_path = so_path;  // nccl_id_hex: run_side makes it where the job's network is
    for (size_t g = 0; g < rp.groups.size(); ++g) {
      GroupDesc gd{rp.groups[g].name, rp.groups[g].color, rp.groups[g].key, {}};
      // Members: every rank with the same color, ordered by (key, rank), as ncclCommSplit orders them.
      std::vector<std::pair<int, int>> m;
      for (auto& other : first.ranks)
        if (other.groups[g].color == gd.color && gd.color >= 0) m.emplace_back(other.groups[g].key, other.rank);
      std::sort(m.begin(), m.end());
      for (auto& [k, r] : m) gd.members.push_back(r);
      w.groups.push_back(std::move(gd));
    }
    w.send_inputs = send_inputs;
    if (p.calibration) {
      w.link_gbps = p.calibration->link_gbps();
      w.hbm_gbps = p.calibration->hbm_gbps;
    }
    for (auto& st : steps) w.steps.push_back(step_plan(st, st.inst->ranks.at(rp.rank)));
    plans.push_back(std::move(w));
  }
  return plans;
}

namespace {

bool sandbox_wanted() {
  const char* s = std::getenv("PKB_SANDBOX");
  return !(s && std::string(s) == "off");
}

/// Prepares a job whose workers run as an unprivileged user (LaunchRequest::sandbox_user): its
/// directory becomes traversable (0711, not listable), and the worker program and the solution's
/// shared object are copied into it read-only, so that the user needs no access to the driver's
/// build tree or cache (which it can then neither read through nor write).
void sandbox_job(JobConfig& cfg, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const char* user = std::getenv("PKB_SANDBOX_USER");
  cfg.launch.sandbox_user = user && *user ? user : "nobody";
  cfg.launch.sandbox_home = dir / "home";
  std::error_code ec;
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  auto place = [&](const fs::path& from, const fs::path& to) {  // read-only, readable and executable by all
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec) fail(Errc::io_error, "cannot copy " + from.string() + " into the job directory: " + ec.message());
    fs::permissions(to,
                    fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                        fs::perms::others_read | fs::perms::others_exec,
                    ec);
  };
  place(cfg.launch.worker_argv.at(0), dir / "pkb-worker");
  cfg.launch.worker_argv[0] = (dir / "pkb-worker").string();
  if (!cfg.plans.empty()) {
    place(cfg.plans[0].so_path, dir / "solution.so");
    for (auto& w : cfg.plans) w.so_path = (dir / "solution.so").string();
  }
}

}  // namespace

/// The solution's processes confine themselves with Landlock (proc/confine.hpp) wherever the
/// kernel has it: writes only to /dev and /proc, pkb's cache unreadable, no ptrace or signal out.
Confinement runner_confinement() {
  if (!sandbox_wanted() || confine::landlock_abi() < 1) return {};
  // Absolute: the runner resolves paths from its own working directory (the workers' home when sandboxed).
  return Confinement{true, {std::filesystem::absolute(cache_dir()).lexically_normal().string()}, {"/dev", "/proc"}};
}

/// What the record says of the workers' isolation once the launcher's part (whom they ran as) and
/// the runner's confinement are known.
void note_confinement(JobResult& res, const Confinement& c) {
  if (!c.enabled) {
    if (sandbox_wanted() && !res.isolated) res.sandbox += "; this kernel has no Landlock to confine them";
    return;
  }
  std::string landlock = confine::describe(confine::policy_of(c.hidden, c.writable), confine::landlock_abi());
  res.sandbox = res.isolated ? res.sandbox + "; " + landlock
                             : "the driver's user (uid " + std::to_string(geteuid()) + "), no_new_privs; " + landlock;
  res.isolated = true;
}

JobResult run_side(const EvalOptions& opts, const Prepared& p, std::vector<WorkerPlan> plans, const std::string& label,
                   CallGate* gate, int side) {
  std::unique_ptr<Launcher> chosen;
  if (opts.launcher == LauncherKind::mpi) {
    chosen = std::make_unique<MpiLauncher>(opts.mpi);
    for (auto& w : plans) w.device = -1;  // each worker takes the GPU of its launcher-given local rank
  } else {
    chosen = std::make_unique<LocalLauncher>();
  }
  Launcher& launcher = *chosen;
  JobConfig cfg;
  cfg.plans = std::move(plans);
  const Confinement confinement = runner_confinement();
  for (auto& w : cfg.plans) w.confine = confinement;
  cfg.launch.world = p.inst.world;
  cfg.launch.worker_argv = {opts.worker_exe};
  char tmpl[] = "/tmp/pkb-job-XXXXXX";
  if (!mkdtemp(tmpl)) fail(Errc::io_error, "cannot create a temporary directory for worker logs");
  cfg.launch.log_dir = tmpl;
  const bool sandboxed = sandbox_wanted() && opts.launcher == LauncherKind::local && geteuid() == 0;
  if (sandboxed) sandbox_job(cfg, tmpl);
  // The job's own network namespace (loopback only) where the driver may make one: its ranks reach
  // each other and nothing else. The NCCL id is made inside it, so that its bootstrap root (a
  // thread of the driver) listens where the ranks are.
  std::unique_ptr<NetworkNamespace> netns;
  std::string network = "the host's network";
  const char* ifname = std::getenv("NCCL_SOCKET_IFNAME");
  if (sandboxed && ifname && std::string(ifname) != "lo") {
    network =
        std::string("the host's network (NCCL_SOCKET_IFNAME=") + ifname + " names an interface a namespace of its own lacks)";
  } else if (sandboxed) {
    try {
      netns = NetworkNamespace::create();
      cfg.launch.netns_fd = netns->fd();
      network = "a network namespace of its own, loopback only";
    } catch (const Error& e) {
      network = std::string("the host's network (") + e.what() + ")";
    }
  }
  std::string nccl_id = netns ? netns->run_inside(nccl_unique_id_hex) : nccl_unique_id_hex();
  for (auto& w : cfg.plans) w.nccl_id_hex = nccl_id;
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); };
  cfg.deadlines.setup = ms(std::max(opts.timeout_s, 60.0));  // a longer --timeout covers slow starts (compute-sanitizer)
  cfg.deadlines.trial = ms(opts.timeout_s);
  cfg.deadlines.init = ms(std::max(opts.timeout_s, 60.0));
  cfg.deadlines.timing = ms(opts.timeout_s * 5 * (gate ? 2 : 1));  // interleaved: the other job's turns too
  cfg.gate = gate;
  cfg.gate_side = side;
  cfg.deadlines.finalize = ms(std::max(opts.timeout_s, 30.0));
  int trials = opts.trials;
  if (opts.progress)
    cfg.on_phase = [label, trials](int, const Phase& phase) {
      std::string shown = phase.kind == Phase::Kind::trial
                              ? "trial " + std::to_string(phase.trial + 1) + "/" + std::to_string(trials)
                              : phase.name();
      std::fprintf(stderr, "\r\033[K[pkb] %s: %s", label.c_str(), shown.c_str());
    };
  JobResult res;
  try {
    res = run_job(launcher, cfg);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(cfg.launch.log_dir, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove_all(cfg.launch.log_dir, ec);
  note_confinement(res, confinement);
  if (opts.launcher == LauncherKind::local) res.sandbox += "; " + network;
  return res;
}

Step main_step(const EvalOptions& opts, const Prepared& p, bool timing) {
  Step st{&p.inst, p.inst.size_name, p.seed, opts.trials, timing_plan(opts, p, p.inst, timing)};
  st.timing.checks = !opts.unchecked_timing;
  if (!opts.profile_dir.empty()) st.profile_calls = kProfileCalls;
  return st;
}

/// How the candidate's job was contained and whom its workers ran as, with a warning where they
/// ran as the driver's user.
void note_isolation(const JobResult& job, EvalRecord& rec, const std::string& label) {
  rec.containment = job.containment;
  rec.sandbox = job.sandbox;
  if (!job.isolated) rec.warnings.push_back(label + " workers were " + job.sandbox + " (docs/evaluation.md, Containment)");
}

void note_containment(const JobResult& job, EvalRecord& rec, const std::string& label) {
  note_isolation(job, rec, label);
  rec.add_check(job.leftover_processes == 0, label + " processes",
                std::to_string(job.leftover_processes) +
                    " process(es) started by the solution were still running after its "
                    "job ended (they were killed)",
                nullptr, Status::flagged);
}

void apply_job_failure(const JobResult& job, EvalRecord& rec, bool is_baseline) {
  if (!is_baseline) note_isolation(job, rec, "candidate");  // a failing candidate's record says it too
  rec.status = is_baseline ? Status::harness_error : job.status;
  rec.message = (is_baseline ? "the baseline failed: " : "") + job.message;
  rec.failed_rank = job.rank;
  rec.failed_phase = job.phase;
  rec.log_tail = job.log_tail;
}

bool charge_interference(const JobResult& beside, const JobResult& alone, const JobResult& cand, EvalRecord& rec) {
  if (alone.status != Status::ok) return false;
  std::string what = "the baseline failed while the candidate's job ran beside it (--interleave) and passed alone: ";
  if (cand.status != Status::ok) {
    apply_job_failure(cand, rec, false);
    rec.warnings.push_back(what + beside.message);
    return true;
  }
  rec.status = Status::flagged;
  rec.message = what + "the candidate's job interfered with it (" + beside.message + ")";
  rec.failed_rank = beside.rank;
  rec.failed_phase = beside.phase;
  rec.log_tail = beside.log_tail;
  return true;
}

void attach_profiles(const EvalOptions& opts, const Instance& inst, const std::string& stem, const std::vector<ProfiledJob>& jobs,
                     EvalRecord& rec, size_t step) {
  if (opts.profile_dir.empty()) return;
  auto work = instance_work(inst);
  std::vector<SideOutcome> sides;
  for (auto& [label, job] : jobs) {
    if (!job || job->steps.size() <= step) {
      sides.push_back(side_missing(label, job ? "its job failed before the profile phase: " + job->message
                                              : "its job did not run (the other side failed first)"));
      continue;
    }
    SideOutcome o = side_outcome(label, job->steps[step], inst.world, work ? work->algbw_bytes : 0, work ? work->hbm_bytes : 0);
    if (!o.side && job->status != Status::ok) o.reason += " (the job failed: " + job->message + ")";
    sides.push_back(std::move(o));
  }
  rec.profile = write_profiles(opts.profile_dir, stem, sides);
}

void finish_record(const EvalOptions& opts, EvalRecord& rec, Clock::time_point t0) {
  rec.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (opts.progress) std::fprintf(stderr, "\r\033[K");
  if (!opts.json_out.empty()) append_line(opts.json_out, signed_record(to_json(rec)).dump());
}

}  // namespace detail

using namespace detail;

namespace {

/// Runs a flow's body after its input was accepted: whatever it throws becomes a harness_error
/// record (written with --json), never an "internal error" without one. (Failures of a worker
/// are already the job's status; what reaches here is pkb's own.)
template <typename Body>
EvalRecord recorded(const EvalOptions& opts, EvalRecord rec, Clock::time_point t0, Body&& body) {
  try {
    body(rec);
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    rec.status = Status::harness_error;
    rec.message = std::string("pkb failed while evaluating (its own fault, not the candidate's): ") + e.what();
    finish_record(opts, rec, t0);
  }
  return rec;
}

void dry_body(const EvalOptions& opts, const Prepared& p, EvalRecord& rec, Clock::time_point t0) {
  rec.candidate.label = p.solution_is_reference ? "baseline" : "solution";
  std::string so;
  if (!compile_side(opts, p.solution_path, rec.candidate, rec, so, false)) {
    finish_record(opts, rec, t0);
    return;
  }
  bool want_inputs = opts.oracle || !opts.dump_dir.empty();
  JobResult job = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, so, rec.candidate.label, want_inputs),
                           rec.candidate.label);
  attach_profiles(opts, p.inst, p.spec.stem, {{rec.candidate.label, &job}}, rec);
  rec.candidate.job_wall_s = job.wall_s;
  rec.candidate.phase_s = job.phase_s;
  rec.candidate.teardown_clean = job.teardown_clean;
  note_containment(job, rec, rec.candidate.label);
  if (!job.teardown_clean)
    rec.warnings.push_back("teardown did not finish cleanly (the job was killed after its results were in)");
  if (job.status != Status::ok) {
    apply_job_failure(job, rec, false);
  } else {
    const StepResult& sr = job.steps.at(0);
    check_sanity(p.inst, sr, rec);
    if (opts.oracle) check_oracle(p.inst, p.seed, sr, rec);
    if (opts.perf) {
      rec.candidate_timing = summarize_timing(sr, rec, rec.candidate.label);
      attach_roofline(p, p.inst, rec);
    }
    conclude_checks(rec);
    if (!opts.dump_dir.empty()) dump_artifacts(opts.dump_dir, p, p.inst, p.seed, sr, "");
  }
  finish_record(opts, rec, t0);
}

/// Interleaved timing: the speedup is the median of the rounds' ratios, with its 95 % interval; an
/// interval reaching further than the bound on either side (or none, with fewer than 6 rounds)
/// marks the record unstable.
void note_interleaved(const EvalOptions& opts, EvalRecord& rec) {
  RoundSpeedup rs = round_speedup(rec.baseline_timing.per_iter_us, rec.candidate_timing.per_iter_us, opts.interleave);
  if (rs.rounds == 0) return;
  rec.speedup = rs.median;
  bool has_interval = rs.lo > 0;
  double b = opts.unstable_bound;
  bool unstable = !has_interval || rs.lo < rs.median * (1 - b) || rs.hi > rs.median * (1 + b);
  using nlohmann::json;
  rec.interleaved = json{{"round", opts.interleave},
                         {"rounds", rs.rounds},
                         {"lo", has_interval ? json(rs.lo) : json(nullptr)},
                         {"hi", has_interval ? json(rs.hi) : json(nullptr)},
                         {"bound", b},
                         {"unstable", unstable}};
  if (!unstable) return;
  char buf[200];
  if (has_interval)
    std::snprintf(buf, sizeof buf,
                  "unstable speedup: 95%% interval [%.3f, %.3f] around %.3f over %d rounds reaches beyond +-%.1f%%", rs.lo, rs.hi,
                  rs.median, rs.rounds, 100 * b);
  else
    std::snprintf(buf, sizeof buf,
                  "unstable speedup: %d rounds give no 95%% interval (6 are needed: more --iters or a smaller --interleave)",
                  rs.rounds);
  rec.warnings.push_back(buf);
}

void eval_body(const EvalOptions& opts, const Prepared& p, EvalRecord& rec, Clock::time_point t0) {
  rec.baseline.label = "baseline";
  rec.candidate.label = "candidate";
  std::string base_so, cand_so;
  if (!compile_side(opts, p.spec.reference_path(), rec.baseline, rec, base_so, true) ||
      !compile_side(opts, p.solution_path, rec.candidate, rec, cand_so, false)) {
    finish_record(opts, rec, t0);
    return;
  }
  bool dump = !opts.dump_dir.empty();
  JobResult base, cand;
  bool interleaved = opts.interleave > 0 && opts.perf;
  if (interleaved) {
    // Both jobs at once, taking turns in the timed phase (eval/gate.hpp); the baseline's in a thread.
    CallGate gate(p.inst.world, opts.interleave);
    std::exception_ptr base_error;
    std::thread base_thread([&] {
      try {
        base = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, base_so, "baseline", dump), "baseline", &gate, 0);
      } catch (...) {
        base_error = std::current_exception();
        gate.leave(0);
      }
    });
    try {
      cand = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, cand_so, "candidate", dump), "candidate", &gate, 1);
    } catch (...) {
      gate.leave(1);
      base_thread.join();
      throw;
    }
    base_thread.join();
    if (base_error) std::rethrow_exception(base_error);
    if (base.status != Status::ok) {
      // The candidate's job ran beside the baseline's on the same GPUs and could have caused this
      // (its memory, its GPU work, its sockets): the baseline runs again, alone, to tell.
      JobResult alone = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, base_so, "baseline", dump), "baseline");
      if (charge_interference(base, alone, cand, rec)) {
        rec.baseline.job_wall_s = alone.wall_s;
        finish_record(opts, rec, t0);
        return;
      }
      base = std::move(alone);  // it fails alone too: pkb's problem, as without --interleave
    }
  } else {
    base = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, base_so, "baseline", dump), "baseline");
  }
  rec.baseline.job_wall_s = base.wall_s;
  rec.baseline.phase_s = base.phase_s;
  rec.baseline.teardown_clean = base.teardown_clean;
  if (base.status != Status::ok) {
    attach_profiles(opts, p.inst, p.spec.stem, {{"baseline", &base}, {"candidate", nullptr}}, rec);
    apply_job_failure(base, rec, true);
    finish_record(opts, rec, t0);
    return;
  }
  if (!interleaved)
    cand = run_side(opts, p, make_plans(p, {main_step(opts, p, opts.perf)}, cand_so, "candidate", dump), "candidate");
  rec.candidate.job_wall_s = cand.wall_s;
  rec.candidate.phase_s = cand.phase_s;
  rec.candidate.teardown_clean = cand.teardown_clean;
  attach_profiles(opts, p.inst, p.spec.stem, {{"baseline", &base}, {"candidate", &cand}}, rec);
  for (auto* s : {&rec.baseline, &rec.candidate})
    if (!s->teardown_clean)
      rec.warnings.push_back(s->label + ": teardown did not finish cleanly (killed after its results were in)");
  if (dump) dump_artifacts(opts.dump_dir, p, p.inst, p.seed, base.steps.at(0), "baseline");
  if (cand.status != Status::ok) {
    apply_job_failure(cand, rec, false);
    finish_record(opts, rec, t0);
    return;
  }
  if (dump) dump_artifacts(opts.dump_dir, p, p.inst, p.seed, cand.steps.at(0), "candidate");
  const StepResult& bs = base.steps.at(0);
  const StepResult& cs = cand.steps.at(0);
  check_sanity(p.inst, bs, rec);  // a baseline that fails its own sanity checks is a harness problem
  if (!rec.checks.empty() && std::any_of(rec.checks.begin(), rec.checks.end(), [](auto& c) { return !c.ok; })) {
    rec.status = Status::harness_error;
    rec.message =
        "the baseline's own outputs failed a sanity check: " + rec.checks.front().what + ": " + rec.checks.front().message;
    finish_record(opts, rec, t0);
    return;
  }
  note_containment(cand, rec, "candidate");
  check_sanity(p.inst, cs, rec);
  check_trials(p.inst, bs, cs, rec);
  if (opts.perf) {
    rec.baseline_timing = summarize_timing(bs, rec, "baseline");
    rec.candidate_timing = summarize_timing(cs, rec, "candidate");
    if (opts.unchecked_timing)
      rec.add_check(false, "timed calls", "not checked (--unchecked-timing: a measurement of the checks' cost)", nullptr,
                    Status::flagged);
    else check_timed_calls(p.inst, bs, cs, rec);
    compare_overheads(rec, p.placement.oversubscribed());
    attach_roofline(p, p.inst, rec);
  }
  conclude_checks(rec);
  if (opts.perf && rec.baseline_timing.measured && rec.candidate_timing.measured && rec.candidate_timing.us.median > 0)
    rec.speedup = rec.baseline_timing.us.median / rec.candidate_timing.us.median;
  if (interleaved && rec.speedup) note_interleaved(opts, rec);
  finish_record(opts, rec, t0);
}

}  // namespace

EvalRecord run_dry(const EvalOptions& opts) {
  auto t0 = Clock::now();
  Prepared p = prepare(opts);
  if (opts.oracle && !find_oracle(p.spec.stem))
    fail(Errc::invalid_argument, p.spec.stem + " has no CPU oracle (problems/" + p.spec.stem + "/oracle.cpp)");
  return recorded(opts, start_record(opts, p, p.inst, "run"), t0, [&](EvalRecord& rec) { dry_body(opts, p, rec, t0); });
}

EvalRecord run_eval(const EvalOptions& opts) {
  auto t0 = Clock::now();
  Prepared p = prepare(opts);
  return recorded(opts, start_record(opts, p, p.inst, "eval"), t0, [&](EvalRecord& rec) { eval_body(opts, p, rec, t0); });
}

int exit_code_for(const EvalRecord& r) {
  if (r.status == Status::ok) return 0;
  if (r.status == Status::harness_error) return 3;
  if (r.status == Status::unsupported) return 4;
  return 1;
}

}  // namespace pkb
