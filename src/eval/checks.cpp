#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/digest.hpp"
#include "core/error.hpp"
#include "core/poison.hpp"
#include "core/ragged.hpp"
#include "eval/compare.hpp"
#include "eval/internal.hpp"
#include "proto/plan.hpp"
#include "roofline/roofline.hpp"
#include "spec/oracle.hpp"

namespace pkb::detail {

using nlohmann::json;

namespace {

uint64_t parse_hex(const json& j) {
  if (!j.is_string()) throw Error(Errc::protocol_error, "expected a hex digest");
  return std::stoull(j.get<std::string>(), nullptr, 16);
}

std::string trial_what(int t, int r, const std::string& kind, const std::string& name) {
  return "trial " + std::to_string(t) + " rank " + std::to_string(r) + " " + kind + " '" + name + "'";
}

size_t count_matching(std::string_view bytes, size_t esz, uint64_t pattern) {
  size_t n = bytes.size() / esz, c = 0;
  uint64_t mask = esz == 8 ? ~0ull : ((1ull << (8 * esz)) - 1);
  for (size_t i = 0; i < n; ++i) c += element_bits_at(bytes.data(), esz, i) == (pattern & mask);
  return c;
}

size_t count_nonfinite(std::string_view bytes, DType d) {
  if (!is_floating(d)) return 0;
  size_t n = bytes.size() / dtype_size(d), c = 0;
  for (size_t i = 0; i < n; ++i) c += !std::isfinite(load_as_double(bytes.data(), d, i));
  return c;
}

/// How many elements of output `o` one call's outputs (`outs`, in the rank's plan order) hold: all,
/// or a ragged output's counted rows, its count read from that call's count output.
template <typename Bytes>
size_t checked_elems(const std::vector<TensorPlan>& plan, size_t o, const std::vector<Bytes>& outs) {
  const TensorPlan& tp = plan[o];
  if (tp.count_of < 0) return tp.numel();
  const auto c = static_cast<size_t>(tp.count_of);
  std::string_view count = outs.at(c);
  if (count.size() < dtype_size(plan[c].dtype)) return 0;
  return counted_elems(load_count(count.data(), plan[c].dtype), static_cast<size_t>(tp.shape[0]), tp.row_elems());
}

/// The bytes of output `o` that a call's checks look at (checked_elems of them).
template <typename Bytes>
std::string_view checked_part(const std::vector<TensorPlan>& plan, size_t o, const std::vector<Bytes>& outs) {
  std::string_view b = outs.at(o);
  return b.substr(0, std::min(b.size(), checked_elems(plan, o, outs) * dtype_size(plan[o].dtype)));
}

/// The shape of a checked part, for messages: a ragged output's counted rows.
std::vector<long long> checked_shape(const TensorPlan& tp, size_t elems) {
  std::vector<long long> s = tp.shape;
  if (tp.count_of >= 0 && tp.row_elems() > 0) s[0] = static_cast<long long>(elems / tp.row_elems());
  return s;
}

/// For a ragged output whose two sides counted different rows: the message (its rows are not
/// compared; the count output itself fails its exact comparison too). Empty where they agree.
std::string count_differs(const TensorPlan& tp, size_t got, size_t want, const char* other) {
  if (tp.count_of < 0 || got == want || tp.row_elems() == 0) return "";
  return "holds " + std::to_string(got / tp.row_elems()) + " counted rows, the " + other + " " +
         std::to_string(want / tp.row_elems()) + " (its rows are compared only where the counts agree)";
}

}  // namespace

void check_sanity(const Instance& inst, const StepResult& job, EvalRecord& rec) {
  const auto& ranks = inst.ranks;
  for (size_t t = 0; t < job.trials.size(); ++t) {
    for (size_t r = 0; r < ranks.size(); ++r) {
      const RankTrial& rt = job.trials[t][r];
      for (size_t o = 0; o < ranks[r].outputs.size(); ++o) {
        const TensorPlan& tp = ranks[r].outputs[o];
        const json& m = rt.meta.at("outputs").at(o);
        std::string what = trial_what(static_cast<int>(t), static_cast<int>(r), "output", tp.name);
        uint64_t ret = parse_hex(m.at("digest_return")), after = parse_hex(m.at("digest_after"));
        rec.add_check(ret == after, what + " fingerprint",
                      "the output changed after pkb_run returned: work left running on another stream, or peers "
                      "writing into it after this rank's call finished");
        // A ragged output: its counted rows only (the worker fingerprinted the same part).
        std::string_view part = checked_part(ranks[r].outputs, o, rt.outputs);
        rec.add_check(digest_bytes(part.data(), part.size()) == after, what + " transfer",
                      "the bytes received differ from the device fingerprint (the worker's report was altered)", nullptr,
                      Status::flagged);
        size_t unwritten = count_matching(part, dtype_size(tp.dtype), parse_hex(m.at("poison")));
        rec.add_check(unwritten == 0, what + " written",
                      std::to_string(unwritten) + " of " + std::to_string(part.size() / dtype_size(tp.dtype)) +
                          (tp.count_of >= 0 ? " counted" : "") + " elements were never written");
        size_t nonfinite = count_nonfinite(part, tp.dtype) - (unwritten && is_floating(tp.dtype) ? unwritten : 0);
        // An output that may hold NaN or Inf where the expected one does: the comparison checks where.
        if (!tp.compare.nonfinite_as_expected)
          rec.add_check(nonfinite == 0, what + " finite", std::to_string(nonfinite) + " elements are NaN or Inf");
      }
      for (size_t i = 0; i < ranks[r].inputs.size(); ++i) {
        if (ranks[r].inputs[i].mutable_) continue;  // modified in place by design (regenerated per call)
        const json& m = rt.meta.at("inputs").at(i);
        rec.add_check(m.at("digest_before") == m.at("digest_after"),
                      trial_what(static_cast<int>(t), static_cast<int>(r), "input", ranks[r].inputs[i].name),
                      "pkb_run modified this input (inputs are read-only)");
      }
    }
  }
}

void check_trials(const Instance& inst, const StepResult& base, const StepResult& cand, EvalRecord& rec) {
  bool identical = true;
  const auto& ranks = inst.ranks;
  for (size_t t = 0; t < cand.trials.size(); ++t)
    for (size_t r = 0; r < ranks.size(); ++r)
      for (size_t o = 0; o < ranks[r].outputs.size(); ++o) {
        const TensorPlan& tp = ranks[r].outputs[o];
        std::string_view got = checked_part(ranks[r].outputs, o, cand.trials[t][r].outputs);
        std::string_view want = checked_part(ranks[r].outputs, o, base.trials[t][r].outputs);
        identical &= got == want;
        std::string what = trial_what(static_cast<int>(t), static_cast<int>(r), "output", tp.name) + " vs baseline";
        size_t esz = dtype_size(tp.dtype);
        if (std::string why = count_differs(tp, got.size() / esz, want.size() / esz, "baseline's"); !why.empty()) {
          rec.add_check(false, what, why);
          continue;
        }
        uint64_t poison = parse_hex(cand.trials[t][r].meta.at("outputs").at(o).at("poison"));
        CompareStats s = compare_bytes(got, want, tp.dtype, for_call(tp.compare, inst.heldout && heldout_trial(t)), poison);
        auto shape = checked_shape(tp, got.size() / esz);
        rec.add_check(s.ok(), what, s.ok() ? "" : describe_mismatch(s, shape), to_json(s, shape));
      }
  rec.bitwise_identical = identical;
}

namespace {

/// Sample values of output o at timed call i from a rank's timing blob.
struct SampleView {
  const std::string* blob = nullptr;
  size_t offset = 0, k = 0, esz = 0;
  /// The k sampled values of one call, as raw bytes.
  std::string_view call(size_t i) const { return {blob->data() + offset + i * k * esz, k * esz}; }
};

std::vector<SampleView> sample_views(const RankTiming& rt, const RankPlan& plan, int iters) {
  std::vector<SampleView> v;
  size_t off = 0;
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    size_t k = rt.body.at("outputs").at(o).at("samples").get<size_t>();
    size_t esz = dtype_size(plan.outputs[o].dtype);
    v.push_back({&rt.samples, off, k, esz});
    off += k * esz * static_cast<size_t>(iters);
  }
  if (off > rt.samples.size()) throw Error(Errc::protocol_error, "timing: sample bytes do not match the plan");
  return v;
}

/// Where the fully checked calls' outputs start in a rank's timing blob (after the samples).
size_t full_offset(const RankTiming& rt, const RankPlan& plan, int iters) {
  size_t off = 0;
  for (size_t o = 0; o < plan.outputs.size(); ++o)
    off +=
        rt.body.at("outputs").at(o).at("samples").get<size_t>() * dtype_size(plan.outputs[o].dtype) * static_cast<size_t>(iters);
  return off;
}

}  // namespace

void check_timed_calls(const Instance& inst, const StepResult& base, const StepResult& cand, EvalRecord& rec) {
  const auto& ranks = inst.ranks;
  bool identical = rec.bitwise_identical.value_or(true);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankTiming& ct = cand.timing.at(r);
    const RankTiming& bt = base.timing.at(r);
    int iters = ct.body.at("iters").get<int>();
    if (iters != bt.body.at("iters").get<int>()) throw Error(Errc::protocol_error, "timing: iteration counts differ");
    auto cv = sample_views(ct, ranks[r], iters), bv = sample_views(bt, ranks[r], iters);
    for (size_t o = 0; o < ranks[r].outputs.size(); ++o) {
      const TensorPlan& tp = ranks[r].outputs[o];
      const json& co = ct.body.at("outputs").at(o);
      const json& bo = bt.body.at("outputs").at(o);
      std::string what = "timed calls rank " + std::to_string(r) + " output '" + tp.name + "'";
      int bad_calls = 0, first_bad = -1;
      std::string first_msg;
      // What the worker committed when each call returned, before it learnt which values would be
      // compared; the report at the end of the phase must agree with it.
      const std::vector<CallCommit>* commits =
          cand.calls.size() > r && cand.calls[r].size() == static_cast<size_t>(iters) ? &cand.calls[r] : nullptr;
      for (int i = 0; i < iters; ++i) {
        std::string msg;
        auto unw = co.at("unwritten").at(i).get<unsigned long long>();
        auto nf = co.at("nonfinite").at(i).get<unsigned long long>();
        if (commits) {
          const CallCommit& cc = (*commits)[static_cast<size_t>(i)];
          unw = std::max(unw, cc.unwritten.at(o));
          nf = std::max(nf, cc.nonfinite.at(o));
        }
        if (commits && (*commits)[static_cast<size_t>(i)].digests.at(o) != co.at("digests").at(i).get<std::string>())
          msg = "the output changed after pkb_run returned (work left running, or peers writing after this rank's call)";
        else if (unw) msg = std::to_string(unw) + " elements never written";
        else if (nf > bo.at("nonfinite").at(i).get<unsigned long long>()) msg = std::to_string(nf) + " elements are NaN or Inf";
        else if (cv[o].k != bv[o].k) {
          throw Error(Errc::protocol_error, "timing: the two sides sampled different counts");
        } else {
          // Timed calls are held-out calls: the sampled values under the norm-wise bound.
          CompareStats cs = compare_bytes(cv[o].call(static_cast<size_t>(i)), bv[o].call(static_cast<size_t>(i)), tp.dtype,
                                          for_call(tp.compare, inst.heldout));
          if (!cs.ok()) msg = "sampled values: " + describe_mismatch(cs, {static_cast<long long>(cv[o].k)});
        }
        identical &= co.at("digests").at(i) == bo.at("digests").at(i);
        if (!msg.empty()) {
          if (first_bad < 0) {
            first_bad = i;
            first_msg = msg;
          }
          ++bad_calls;
        }
      }
      rec.add_check(bad_calls == 0, what,
                    bad_calls ? std::to_string(bad_calls) + " of " + std::to_string(iters) + " timed calls wrong; first, call " +
                                    std::to_string(first_bad) + ": " + first_msg
                              : "");
    }
    // The fully checked calls: every element against the baseline's same call, and the bytes must be
    // what the worker fingerprinted when the call returned (committed before it knew the call was one).
    if (!cand.full_calls.empty() && cand.full_calls == base.full_calls) {
      size_t coff = full_offset(ct, ranks[r], iters), boff = full_offset(bt, ranks[r], iters);
      const auto& outs = ranks[r].outputs;
      for (int call : cand.full_calls) {
        std::vector<std::string_view> got_all, want_all;  // the call's outputs, whole
        for (const TensorPlan& tp : outs) {
          size_t n = tp.bytes();
          if (coff + n > ct.samples.size() || boff + n > bt.samples.size())
            throw Error(Errc::protocol_error, "timing: the fully checked outputs are shorter than the plan says");
          got_all.emplace_back(ct.samples.data() + coff, n);
          want_all.emplace_back(bt.samples.data() + boff, n);
          coff += n;
          boff += n;
        }
        for (size_t o = 0; o < outs.size(); ++o) {
          const TensorPlan& tp = outs[o];
          std::string_view got = checked_part(outs, o, got_all), want = checked_part(outs, o, want_all);
          std::string what = "timed call " + std::to_string(call) + " rank " + std::to_string(r) + " output '" + tp.name + "'";
          if (cand.calls.size() > r && cand.calls[r].size() > static_cast<size_t>(call)) {
            uint64_t committed = std::stoull(cand.calls[r][static_cast<size_t>(call)].digests.at(o), nullptr, 16);
            rec.add_check(digest_bytes(got.data(), got.size()) == committed, what + " transfer",
                          "the bytes reported differ from the fingerprint committed when the call returned", nullptr,
                          Status::flagged);
          }
          size_t esz = dtype_size(tp.dtype);
          if (std::string why = count_differs(tp, got.size() / esz, want.size() / esz, "baseline's"); !why.empty()) {
            rec.add_check(false, what + " (every element) vs baseline", why);
            continue;
          }
          CompareStats cs = compare_bytes(got, want, tp.dtype, for_call(tp.compare, inst.heldout));
          auto shape = checked_shape(tp, got.size() / esz);
          rec.add_check(cs.ok(), what + " (every element) vs baseline", cs.ok() ? "" : describe_mismatch(cs, shape),
                        to_json(cs, shape));
        }
      }
    }
    for (size_t i = 0; i < ranks[r].inputs.size(); ++i) {
      if (ranks[r].inputs[i].mutable_) continue;
      const json& ci = ct.body.at("inputs").at(i);
      int changed = 0;
      for (int c = 0; c < iters; ++c) changed += ci.at("gen").at(c) != ci.at("after").at(c);
      rec.add_check(changed == 0, "timed calls rank " + std::to_string(r) + " input '" + ranks[r].inputs[i].name + "'",
                    std::to_string(changed) + " timed calls modified this input (inputs are read-only)");
    }
  }
  rec.bitwise_identical = identical;
}

SideTiming summarize_timing(const StepResult& job, EvalRecord& rec, const std::string& label) {
  SideTiming st;
  if (job.timing.empty()) return st;
  std::vector<std::vector<double>> per_rank;
  for (size_t r = 0; r < job.timing.size(); ++r) {
    const json& b = job.timing[r].body;
    std::vector<double> us;
    double sum_ms = 0;
    // The times that count are those committed call by call (the report at the end must repeat them).
    bool committed = job.calls.size() > r && job.calls[r].size() == b.at("times_ms").size();
    size_t differ = 0;
    for (size_t i = 0; i < b.at("times_ms").size(); ++i) {
      double ms = b["times_ms"][i].get<double>();
      if (committed) {
        double c = job.calls[r][i].time_ms;
        differ += std::fabs(c - ms) > 1e-6 * std::max(1.0, c);
        ms = c;
      }
      us.push_back(ms * 1000.0);
      sum_ms += ms;
    }
    if (committed)
      rec.add_check(differ == 0, label + " timing report rank " + std::to_string(r),
                    std::to_string(differ) + " call times in the final report differ from those committed as the calls ran",
                    nullptr, Status::flagged);
    double span = b.at("span_ms").get<double>(), host = b.at("host_ms").get<double>();
    double driver = b.value("driver_ms", 1e300);
    st.span_ms = std::max(st.span_ms, span);
    st.host_ms = std::max(st.host_ms, host);
    // Per-call intervals lie inside the span, the span inside the worker's wall clock, and that
    // inside the driver's own clock around the phase (which no worker can touch).
    bool plausible = sum_ms <= span * 1.02 + 0.02 && span <= host * 1.02 + 0.2 && host <= driver * 1.02 + 1.0;
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "timer readings inconsistent: calls sum to %.3f ms, GPU span %.3f ms, worker wall clock %.3f ms, driver "
                  "clock %.3f ms",
                  sum_ms, span, host, driver);
    std::string l2 = label + ": the solution set a persisting-L2 limit; it was reset before every timed call";
    if (b.value("l2_resets", 0) > 0 && std::find(rec.warnings.begin(), rec.warnings.end(), l2) == rec.warnings.end())
      rec.warnings.push_back(l2);
    rec.add_check(plausible, label + " timing rank " + std::to_string(r), plausible ? "" : buf, nullptr, Status::flagged);
    per_rank.push_back(std::move(us));
  }
  st.per_iter_us = max_over_ranks(per_rank);
  st.us = summarize(st.per_iter_us);
  // The driver's clock around every timed call: from the last rank's grant of the call's seed to the
  // last rank's commit. Every rank's call lies inside that window (no rank can start before its seed
  // arrived, or before the barrier that needs every rank), so no call can be longer than it; what is
  // left over is the harness's per-call overhead, which honest solutions share (compare_overheads).
  if (!job.calls.empty() &&
      std::all_of(job.calls.begin(), job.calls.end(), [&](const auto& c) { return c.size() == st.per_iter_us.size(); })) {
    std::vector<double> over;
    size_t longer = 0;
    double worst = 0;
    for (size_t i = 0; i < st.per_iter_us.size(); ++i) {
      double granted = 0, received = 0;
      for (auto& rank_calls : job.calls) {
        granted = std::max(granted, rank_calls[i].granted_s);
        received = std::max(received, rank_calls[i].received_s);
      }
      double window_us = (received - granted) * 1e6;
      over.push_back(window_us - st.per_iter_us[i]);
      if (st.per_iter_us[i] > window_us + 20.0) {  // 20 us: the two clocks' resolution and skew
        ++longer;
        worst = std::max(worst, st.per_iter_us[i] - window_us);
      }
    }
    st.driver_overhead_us = summarize(over).median;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%zu timed calls reported longer than the driver's clock around them (by up to %.1f us)",
                  longer, worst);
    rec.add_check(longer == 0, label + " timing vs the driver's clock", longer ? buf : "", nullptr, Status::flagged);
  }
  st.iters = job.timing[0].body.at("iters").get<int>();
  st.warmup = job.timing[0].body.at("warmup").get<int>();
  st.groups = job.timing[0].body.at("groups").get<int>();
  st.measured = true;
  return st;
}

void compare_overheads(EvalRecord& rec, bool oversubscribed) {
  double b = rec.baseline_timing.driver_overhead_us, c = rec.candidate_timing.driver_overhead_us;
  if (b < 0 || c < 0) return;
  // Work a solution does outside its timed interval (between calls, or hidden by a forged time)
  // lengthens the driver's window around the call but not the reported time. Honest solutions of
  // one problem share the harness's overhead; the margin absorbs host jitter.
  double limit = 1.5 * b + 100.0;
  if (c <= limit) return;
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "the driver's clock around each call exceeds the reported time by %.1f us (median), against %.1f us for "
                "the baseline: work done outside the timed interval, or times reported short",
                c, b);
  if (oversubscribed) {  // ranks sharing a GPU: the socket transport's jitter makes this a hint only
    rec.warnings.push_back(std::string("timing vs the driver's clock: ") + buf);
    return;
  }
  rec.add_check(false, "candidate timing vs the driver's clock", buf, nullptr, Status::flagged);
}

std::string generate_input(const TensorPlan& tp, uint64_t seed, uint64_t trial, int rank, size_t i) {
  std::string host(tp.bytes(), '\0');
  uint64_t key = input_key(stream_seed(seed, trial), trial, static_cast<uint64_t>(rank), i, tp.dist);
  Dist d = heldout_trial(trial) ? held_out(tp.dist) : tp.dist;
  for (size_t e = 0; e < tp.numel(); ++e) generate_element(host.data(), tp.dtype, d, key, e);
  return host;
}

void check_oracle(const Instance& inst, uint64_t seed, const StepResult& job, EvalRecord& rec) {
  OracleFn fn = find_oracle(inst.spec->stem);
  if (!fn) throw Error(Errc::invalid_argument, inst.spec->stem + " has no CPU oracle");
  check_oracle_with(fn, inst, seed, job, rec);
}

void check_oracle_with(OracleFn fn, const Instance& inst, uint64_t seed, const StepResult& job, EvalRecord& rec) {
  const auto& ranks = inst.ranks;
  for (size_t t = 0; t < job.trials.size(); ++t) {
    OracleIO io;
    io.world = inst.world;
    io.vars = call_vars(inst, stream_seed(seed, t), t);  // with trial t's per-call parameters
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::vector<OracleTensor> ins, outs;
      for (size_t i = 0; i < ranks[r].inputs.size(); ++i) {
        const TensorPlan& tp = ranks[r].inputs[i];
        const std::string& bytes = job.trials[t][r].inputs.at(i);
        // The driver regenerates the input on the CPU: it must match the GPU's bit for bit (the
        // worker reports inputs after the call; a mutable input was legitimately changed by then,
        // and the oracle reads the values the call started from).
        std::string host = generate_input(tp, seed, t, static_cast<int>(r), i);
        if (!tp.mutable_)
          rec.add_check(host == bytes,
                        trial_what(static_cast<int>(t), static_cast<int>(r), "input", tp.name) + " host/device generation",
                        "the GPU generated different input bytes than the CPU", nullptr, Status::harness_error);
        OracleTensor ot{tp.name, tp.shape, std::vector<double>(tp.numel())};
        for (size_t e = 0; e < tp.numel(); ++e) ot.values[e] = load_as_double(host.data(), tp.dtype, e);
        ins.push_back(std::move(ot));
      }
      for (auto& tp : ranks[r].outputs) outs.push_back({tp.name, tp.shape, std::vector<double>(tp.numel(), 0.0)});
      io.inputs.push_back(std::move(ins));
      io.outputs.push_back(std::move(outs));
    }
    fn(io);
    for (size_t r = 0; r < ranks.size(); ++r)
      for (size_t o = 0; o < ranks[r].outputs.size(); ++o) {
        const TensorPlan& tp = ranks[r].outputs[o];
        std::string what = trial_what(static_cast<int>(t), static_cast<int>(r), "output", tp.name) + " vs oracle";
        std::string_view got = checked_part(ranks[r].outputs, o, job.trials[t][r].outputs);
        std::vector<double> want = io.outputs[r][o].values;
        if (tp.count_of >= 0) {  // the oracle's count says which rows it computed
          const auto& count = io.outputs[r][static_cast<size_t>(tp.count_of)].values;
          long long n = count.empty() ? 0 : std::llround(count[0]);
          want.resize(std::min(want.size(), counted_elems(n, static_cast<size_t>(tp.shape[0]), tp.row_elems())));
          if (std::string why = count_differs(tp, got.size() / dtype_size(tp.dtype), want.size(), "oracle"); !why.empty()) {
            rec.add_check(false, what, why);
            continue;
          }
        }
        CompareStats s = compare_to_values(got, tp.dtype, want, for_call(tp.compare, inst.heldout && heldout_trial(t)));
        auto shape = checked_shape(tp, want.size());
        rec.add_check(s.ok(), what, s.ok() ? "" : describe_mismatch(s, shape), to_json(s, shape));
      }
  }
}

void attach_roofline(const Prepared& p, const Instance& inst, EvalRecord& rec) {
  auto work = instance_work(inst);
  if (!work || !rec.candidate_timing.measured) return;
  HardwareFacts peaks = datasheet_facts(p.sys.gpu_name, p.sys.gpu_count);
  const HardwareFacts& ceilings = p.calibration ? *p.calibration : peaks;
  std::string source = p.calibration ? "calibrated" : "datasheet";
  Roofline r = compute_roofline(*work, ceilings, peaks, inst.dtype, rec.candidate_timing.us.median, source);
  rec.roofline = to_json(r, *work);
  if (rec.baseline_timing.measured && rec.baseline_timing.us.median > 0)
    rec.roofline["baseline_pct"] = 100.0 * r.floor_us / rec.baseline_timing.us.median;
  char buf[200];
  std::snprintf(buf, sizeof buf, "median %.3f us is below the physical floor of %.3f us (datasheet peaks)", r.measured_us,
                r.peak_floor_us);
  rec.add_check(!r.impossible, rec.candidate.label + " timing vs roofline", r.impossible ? buf : "", nullptr, Status::flagged);
}

void conclude_checks(EvalRecord& rec) {
  if (rec.checks.empty() || rec.status != Status::ok) return;
  const Check* pick = nullptr;
  for (Status s : {Status::harness_error, Status::mismatch, Status::flagged}) {
    for (auto& c : rec.checks)
      if (c.status == s) {
        pick = &c;
        break;
      }
    if (pick) break;
  }
  if (!pick) pick = &rec.checks.front();
  rec.status = pick->status;
  rec.message = pick->what + ": " + pick->message;
  if (rec.checks.size() > 1) rec.message += " (+" + std::to_string(rec.checks.size() - 1) + " more failed checks)";
}

}  // namespace pkb::detail
