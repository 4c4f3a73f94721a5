#include "profile/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "core/error.hpp"

namespace pkb::profile {

using nlohmann::json;

namespace {

using Interval = std::pair<uint64_t, uint64_t>;

/// The union of intervals as disjoint sorted intervals.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

uint64_t length(const std::vector<Interval>& v) {
  uint64_t n = 0;
  for (auto& [a, b] : v) n += b - a;
  return n;
}

/// Length of the intersection of two disjoint sorted interval lists.
uint64_t overlap_length(const std::vector<Interval>& x, const std::vector<Interval>& y) {
  uint64_t n = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    uint64_t a = std::max(x[i].first, y[j].first), b = std::min(x[i].second, y[j].second);
    if (a < b) n += b - a;
    (x[i].second < y[j].second ? i : j)++;
  }
  return n;
}

/// An activity clipped to the rank's calls (the profile may hold work between them: generation,
/// checks, the barrier).
std::vector<Interval> within(const std::vector<Interval>& calls, uint64_t a, uint64_t b) {
  std::vector<Interval> out;
  for (auto& [c0, c1] : calls) {
    uint64_t x = std::max(a, c0), y = std::min(b, c1);
    if (x < y) out.emplace_back(x, y);
  }
  return out;
}

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

const char* kind_name(Activity::Kind k) {
  switch (k) {
    case Activity::Kind::kernel: return "kernel";
    case Activity::Kind::memcpy: return "memcpy";
    case Activity::Kind::memset: return "memset";
  }
  return "kernel";
}

Activity::Kind parse_kind(const std::string& s) {
  if (s == "kernel") return Activity::Kind::kernel;
  if (s == "memcpy") return Activity::Kind::memcpy;
  if (s == "memset") return Activity::Kind::memset;
  throw Error(Errc::invalid_argument, "profile: unknown activity kind '" + s + "' (kernel, memcpy, memset)");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

bool is_communication(const Activity& a) {
  if (a.kind == Activity::Kind::memcpy) return a.name == "PtoP";
  return a.kind == Activity::Kind::kernel && a.name.rfind("nccl", 0) == 0;
}

bool is_harness(const Activity& a) {
  return a.kind == Activity::Kind::kernel &&
         (a.name.find("barrier_delay_kernel") != std::string::npos || a.name.find("pkb::worker::") != std::string::npos);
}

std::vector<Call> calls_between_marks(const std::vector<Activity>& activity, int calls, std::string_view mark) {
  std::vector<const Activity*> marks;
  for (const Activity& a : activity)
    if (a.kind == Activity::Kind::kernel && a.name.find(mark) != std::string::npos) marks.push_back(&a);
  std::sort(marks.begin(), marks.end(), [](const Activity* x, const Activity* y) { return x->start_ns < y->start_ns; });
  if (calls < 0 || marks.size() != 2 * static_cast<size_t>(calls))
    throw Error(Errc::invalid_argument,
                fmt::format("{} of the {} marks ({}) around {} profiled calls", marks.size(), 2 * calls, mark, calls));
  std::vector<Call> out;
  for (size_t c = 0; c < static_cast<size_t>(calls); ++c) {
    const Activity &before = *marks[2 * c], &after = *marks[2 * c + 1];
    if (after.start_ns < before.end_ns)
      throw Error(Errc::invalid_argument, fmt::format("the marks around profiled call {} overlap", c));
    out.push_back({before.end_ns, after.start_ns});
  }
  return out;
}

RankProfile rank_from_json(const json& r) {
  RankProfile rp;
  try {
    rp.rank = r.at("rank").get<int>();
    for (auto& a : r.at("activity")) {
      Activity x;
      x.kind = parse_kind(a.at("kind").get<std::string>());
      x.name = a.at("name").get<std::string>();
      x.stream = a.value("stream", 0u);
      x.start_ns = a.at("start").get<uint64_t>();
      x.end_ns = a.at("end").get<uint64_t>();
      x.bytes = a.value("bytes", uint64_t{0});
      if (x.end_ns < x.start_ns)
        throw Error(Errc::invalid_argument,
                    "profile: rank " + std::to_string(rp.rank) + ": '" + x.name + "' ends before it starts");
      rp.activity.push_back(std::move(x));
    }
    for (auto& c : r.at("calls")) {
      Call call{c.at("start").get<uint64_t>(), c.at("end").get<uint64_t>()};
      if (call.end_ns < call.start_ns)
        throw Error(Errc::invalid_argument, "profile: rank " + std::to_string(rp.rank) + ": a call ends before it starts");
      rp.calls.push_back(call);
    }
    rp.dropped = r.value("dropped", uint64_t{0});
  } catch (const json::exception& e) {
    throw Error(Errc::invalid_argument, std::string("profile: malformed activity: ") + e.what());
  }
  return rp;
}

SideProfile side_from_json(const json& j) {
  SideProfile s;
  try {
    s.label = j.at("label").get<std::string>();
    if (j.contains("algbw_bytes")) s.algbw_bytes = j["algbw_bytes"].get<double>();
    if (j.contains("hbm_bytes")) s.hbm_bytes = j["hbm_bytes"].get<double>();
    for (auto& r : j.at("ranks")) s.ranks.push_back(rank_from_json(r));
  } catch (const json::exception& e) {
    throw Error(Errc::invalid_argument, std::string("profile: malformed activity: ") + e.what());
  }
  return s;
}

json to_json(const RankProfile& r) {
  json acts = json::array(), calls = json::array();
  for (auto& a : r.activity) {
    json x{{"kind", kind_name(a.kind)}, {"name", a.name}, {"stream", a.stream}, {"start", a.start_ns}, {"end", a.end_ns}};
    if (a.bytes) x["bytes"] = a.bytes;
    acts.push_back(std::move(x));
  }
  for (auto& c : r.calls) calls.push_back({{"start", c.start_ns}, {"end", c.end_ns}});
  json j{{"rank", r.rank}, {"activity", acts}, {"calls", calls}};
  if (r.dropped) j["dropped"] = r.dropped;
  return j;
}

json to_json(const SideProfile& side) {
  json ranks = json::array();
  for (auto& r : side.ranks) ranks.push_back(to_json(r));
  json j{{"label", side.label}, {"ranks", ranks}};
  if (side.algbw_bytes) j["algbw_bytes"] = *side.algbw_bytes;
  if (side.hbm_bytes) j["hbm_bytes"] = *side.hbm_bytes;
  return j;
}

Summary summarize(const SideProfile& side) {
  Summary s;
  s.label = side.label;
  std::map<std::string, KernelShare> by_name;
  uint64_t all_ns = 0;
  size_t calls = side.ranks.empty() ? 0 : side.ranks[0].calls.size();
  for (auto& r : side.ranks) calls = std::min(calls, r.calls.size());
  s.calls = static_cast<int>(calls);
  std::vector<double> per_call(calls, 0.0);
  for (auto& r : side.ranks) {
    s.dropped += r.dropped;
    std::vector<Interval> call_iv;
    for (size_t i = 0; i < calls; ++i) {
      call_iv.emplace_back(r.calls[i].start_ns, r.calls[i].end_ns);
      per_call[i] = std::max(per_call[i], ms(r.calls[i].end_ns - r.calls[i].start_ns));
    }
    call_iv = merged(call_iv);
    std::vector<Interval> any, comm, compute, harness;
    for (auto& a : r.activity) {
      auto in = within(call_iv, a.start_ns, a.end_ns);
      if (in.empty()) continue;
      any.insert(any.end(), in.begin(), in.end());
      if (is_harness(a)) harness.insert(harness.end(), in.begin(), in.end());
      else if (is_communication(a)) comm.insert(comm.end(), in.begin(), in.end());
      else if (a.kind == Activity::Kind::kernel) compute.insert(compute.end(), in.begin(), in.end());
      uint64_t n = length(in);
      all_ns += n;
      KernelShare& k = by_name[a.kind == Activity::Kind::kernel ? a.name : std::string(kind_name(a.kind)) + " " + a.name];
      k.count++;
      k.total_ms += ms(n);
    }
    RankSummary rs;
    rs.rank = r.rank;
    rs.call_ms = ms(length(call_iv));
    auto u = merged(any), c = merged(comm), k = merged(compute);
    rs.busy = rs.call_ms > 0 ? ms(length(u)) / rs.call_ms : 0;
    rs.communication_ms = ms(length(c));
    rs.overlap = length(c) ? static_cast<double>(overlap_length(c, k)) / static_cast<double>(length(c)) : 0;
    rs.harness_ms = ms(length(merged(harness)));
    s.ranks.push_back(rs);
  }
  for (auto& [name, k] : by_name) {
    k.name = name;
    k.share = all_ns ? k.total_ms / ms(all_ns) : 0;
    s.kernels.push_back(k);
  }
  std::sort(s.kernels.begin(), s.kernels.end(), [](auto& a, auto& b) { return a.total_ms > b.total_ms; });
  s.median_call_ms = median(per_call);
  if (s.median_call_ms > 0) {
    if (side.algbw_bytes) s.link_gbps = *side.algbw_bytes / (s.median_call_ms * 1e6);
    if (side.hbm_bytes) s.hbm_gbps = *side.hbm_bytes / (s.median_call_ms * 1e6);
  }
  return s;
}

std::string summary_text(const Summary& s, int max_kernels) {
  std::string t =
      fmt::format("{}: {} profiled calls, median {:.4f} ms (slowest rank per call)", s.label, s.calls, s.median_call_ms);
  if (s.link_gbps) t += fmt::format(", {:.1f} GB/s algbw", *s.link_gbps);
  if (s.hbm_gbps) t += fmt::format(", {:.1f} GB/s HBM", *s.hbm_gbps);
  t += "\n  GPU time by kernel (all ranks, during calls):\n";
  int shown = 0;
  double rest = 0;
  for (auto& k : s.kernels) {
    if (shown++ < max_kernels) {
      std::string name = k.name.size() > 70 ? k.name.substr(0, 67) + "..." : k.name;
      t += fmt::format("    {:5.1f}%  {:9.4f} ms  x{:<5d} {}\n", 100 * k.share, k.total_ms, k.count, name);
    } else {
      rest += k.share;
    }
  }
  if (shown > max_kernels) t += fmt::format("    {:5.1f}%  ({} more)\n", 100 * rest, shown - max_kernels);
  t += "  per rank: busy | communication | of it overlapped with compute | pkb barrier inside calls\n";
  for (auto& r : s.ranks)
    t += fmt::format("    rank {}: {:5.1f}% | {:.4f} ms | {:5.1f}% | {:.4f} ms\n", r.rank, 100 * r.busy, r.communication_ms,
                     100 * r.overlap, r.harness_ms);
  if (s.dropped)
    t += fmt::format("  {} activity records past the per-rank limit were left out: the figures above undercount\n", s.dropped);
  return t;
}

json chrome_trace(const std::vector<SideProfile>& sides) {
  json events = json::array();
  for (size_t si = 0; si < sides.size(); ++si) {
    const SideProfile& side = sides[si];
    uint64_t t0 = UINT64_MAX;
    for (auto& r : side.ranks) {
      for (auto& c : r.calls) t0 = std::min(t0, c.start_ns);
      if (r.calls.empty())
        for (auto& a : r.activity) t0 = std::min(t0, a.start_ns);
    }
    if (t0 == UINT64_MAX) t0 = 0;
    auto us = [t0](uint64_t ns) { return (static_cast<double>(ns) - static_cast<double>(t0)) / 1e3; };
    for (auto& r : side.ranks) {
      int pid = static_cast<int>(si) * 1000 + r.rank;
      events.push_back({{"name", "process_name"},
                        {"ph", "M"},
                        {"ts", 0},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"name", side.label + " rank " + std::to_string(r.rank)}}}});
      events.push_back(
          {{"name", "process_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "calls (pkb_run)"}}}});
      std::map<uint32_t, bool> streams;
      for (size_t i = 0; i < r.calls.size(); ++i)
        events.push_back({{"name", "call " + std::to_string(i)},
                          {"cat", "call"},
                          {"ph", "X"},
                          {"pid", pid},
                          {"tid", 0},
                          {"ts", us(r.calls[i].start_ns)},
                          {"dur", static_cast<double>(r.calls[i].end_ns - r.calls[i].start_ns) / 1e3}});
      for (auto& a : r.activity) {
        int tid = static_cast<int>(a.stream) + 1;  // 0 is the calls' track
        if (!streams[a.stream]) {
          streams[a.stream] = true;
          events.push_back({{"name", "thread_name"},
                            {"ph", "M"},
                            {"ts", 0},
                            {"pid", pid},
                            {"tid", tid},
                            {"args", {{"name", "stream " + std::to_string(a.stream)}}}});
        }
        json ev{{"name", a.kind == Activity::Kind::kernel ? a.name : std::string(kind_name(a.kind)) + " " + a.name},
                {"cat", is_communication(a) ? "communication"
                        : is_harness(a)     ? "pkb"
                                            : kind_name(a.kind)},
                {"ph", "X"},
                {"pid", pid},
                {"tid", tid},
                {"ts", us(a.start_ns)},
                {"dur", static_cast<double>(a.end_ns - a.start_ns) / 1e3}};
        if (a.bytes) ev["args"] = {{"bytes", a.bytes}};
        events.push_back(std::move(ev));
      }
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ns"}};
}

}  // namespace pkb::profile
