#include "report/console.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

namespace pkb {

namespace {

std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i)
    out += "    | " + lines[i] + "\n";
  return out;
}

std::string params_text(const EvalRecord& r) {
  std::string s;
  for (auto& [k, v] : r.params.items()) {
    if (k == "W") continue;
    s += fmt::format("{}{}={}", s.empty() ? "" : ", ", k, v.get<double>());
  }
  return s;
}

std::string timing_row(const char* label, const SideTiming& t) {
  return fmt::format("    {:<10} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", label, t.us.median, t.us.mean, t.us.p10, t.us.p90);
}

/// "36 cells: 34 ok, 1 mismatch, 1 refused" (statuses in the order they first appear).
std::string full_text(const std::vector<FullCell>& cells) {
  std::vector<std::pair<std::string, int>> counts;
  for (auto& c : cells) {
    std::string st = c.status_text();
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& p) { return p.first == st; });
    if (it == counts.end()) counts.emplace_back(st, 1);
    else ++it->second;
  }
  std::string s = fmt::format("{} cells:", cells.size());
  for (size_t i = 0; i < counts.size(); ++i) s += fmt::format("{} {} {}", i ? "," : "", counts[i].second, counts[i].first);
  return s;
}

}  // namespace

std::string format_summary(const EvalRecord& r, bool color) {
  const char* green = color ? "\033[32m" : "";
  const char* red = color ? "\033[31m" : "";
  const char* yellow = color ? "\033[33m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string o;
  o += fmt::format("pkb {} {}  W={}  {}  size={} ({})  trials={}\n", r.kind, r.problem_stem, r.world, r.dtype, r.size_name,
                   params_text(r), r.trials);
  auto side = [&](const SideInfo& s) {
    if (s.path.empty()) return;
    o += fmt::format("  {:<10} {}  (sha256 {}…, {})\n", s.label, s.path, s.sha256.substr(0, 12),
                     s.compile_cached ? "cached build" : fmt::format("built in {:.1f} s", s.compile_s));
  };
  side(r.baseline);
  side(r.candidate);
  if (r.oversubscribed)
    o += fmt::format("  {:<10} {}{} ranks on {} GPU(s) (--oversubscribe): verdicts only, timings are not performance{}\n",
                     "placement", yellow, r.world, r.gpus_used, reset);
  const char* c = r.status == Status::ok ? green : (r.status == Status::flagged ? yellow : red);
  o += fmt::format("  {:<10} {}{}{}", "status", c, to_string(r.status), reset);
  if (r.status == Status::ok) {
    o += fmt::format(" — {} checks passed", r.checks_passed);
    if (r.bitwise_identical)
      o += *r.bitwise_identical ? ", outputs bitwise identical to the baseline" : ", outputs within tolerance of the baseline";
    o += "\n";
  } else {
    o += fmt::format(" — {}\n", r.message);
    if (r.failed_rank >= 0) o += fmt::format("  {:<10} rank {}, phase {}\n", "where", r.failed_rank, r.failed_phase);
    if (!r.compile_log.empty()) o += "  compiler output (last lines):\n" + last_lines(r.compile_log, 15);
    if (!r.log_tail.empty()) o += "  worker output (last lines):\n" + last_lines(r.log_tail, 12);
  }
  if (!r.full.empty()) o += fmt::format("  {:<10} {}\n", "full", full_text(r.full));
  if (r.baseline_timing.measured || r.candidate_timing.measured) {
    const SideTiming& any = r.candidate_timing.measured ? r.candidate_timing : r.baseline_timing;
    o += fmt::format("  timing     {:>10} {:>10} {:>10} {:>10}   µs per call, slowest rank; {} calls, {} input groups\n",
                     "median", "mean", "p10", "p90", any.iters, any.groups);
    if (r.baseline_timing.measured) o += timing_row("baseline", r.baseline_timing);
    if (r.candidate_timing.measured)
      o += timing_row(r.kind == "run" ? r.candidate.label.c_str() : "candidate", r.candidate_timing);
  }
  if (r.roofline.is_object() && !r.oversubscribed) {
    const auto& rf = r.roofline;
    o += fmt::format("  {:<10} {:.1f}% of the {:.2f} µs floor ({}-bound, {})", "roofline", rf.value("pct", 0.0),
                     rf.value("floor_us", 0.0), rf.value("bound", "?"), rf.value("source", "?"));
    if (rf.value("busbw_gbps", 0.0) > 0)
      o += fmt::format("; busbw {:.0f} GB/s = {:.0f}% of the link", rf.value("busbw_gbps", 0.0), rf.value("link_pct", 0.0));
    o += "\n";
  }
  if (r.speedup && r.oversubscribed)
    o += fmt::format("  {:<10} {:.3f}x — not a measurement (ranks share GPUs; left out of pkb report's speedups)\n", "speedup",
                     *r.speedup);
  else if (r.speedup)
    o += fmt::format("  {:<10} {}{:.3f}x{}\n", "speedup", *r.speedup >= 1.0 ? green : yellow, *r.speedup, reset);
  if (r.speedup && r.interleaved.is_object()) {
    const auto& iv = r.interleaved;
    std::string range = iv.value("lo", nlohmann::json()).is_number()
                            ? fmt::format("95% interval [{:.3f}, {:.3f}]", iv["lo"].get<double>(), iv["hi"].get<double>())
                            : std::string("no 95% interval (fewer than 6 rounds)");
    o += fmt::format("  {:<10} {} rounds of {} calls, {}{}\n", "interleave", iv.value("rounds", 0), iv.value("round", 0), range,
                     iv.value("unstable", false) ? " — unstable" : "");
  }
  for (auto& w : r.warnings) o += fmt::format("  {}warning{}    {}\n", yellow, reset, w);
  std::string jobs;
  if (r.baseline.job_wall_s > 0) jobs += fmt::format("baseline job {:.1f} s", r.baseline.job_wall_s);
  if (r.candidate.job_wall_s > 0)
    jobs += fmt::format("{}{} job {:.1f} s", jobs.empty() ? "" : ", ", r.candidate.label, r.candidate.job_wall_s);
  o += fmt::format("  {:<10} {:.1f} s{}\n", "wall", r.wall_s, jobs.empty() ? "" : " (" + jobs + ")");
  // Where each job's time went (the slowest rank per phase); phases under 0.1 s are left out.
  bool first = true;
  for (const SideInfo* side : {&r.baseline, &r.candidate}) {
    std::string phases;
    for (auto& [phase, secs] : side->phase_s)
      if (secs >= 0.1) phases += fmt::format("{}{} {:.1f}", phases.empty() ? "" : ", ", phase, secs);
    if (phases.empty()) continue;
    o += fmt::format("  {:<10} {}: {} s\n", first ? "phases" : "", side->label, phases);
    first = false;
  }
  return o;
}

void print_summary(const EvalRecord& r, std::FILE* out) {
  std::string s = format_summary(r, isatty(fileno(out)) != 0);
  std::fputs(s.c_str(), out);
  std::fflush(out);
}

}  // namespace pkb
