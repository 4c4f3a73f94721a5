#include "compare/results_diff.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace pkb {

namespace {

using Key = std::tuple<int, std::string, std::string>;  // problem id, stem, configuration

std::string config_of(const ResultRow& r) { return fmt::format("W={} {} {}", r.world, r.dtype, r.size); }

/// A correct timed record beats any other; among those the faster; otherwise the later wins.
bool better(const ResultRow& candidate, const ResultRow& current) {
  auto timed_ok = [](const ResultRow& r) { return r.status == Status::ok && r.candidate_us.has_value(); };
  if (timed_ok(candidate) != timed_ok(current)) return timed_ok(candidate);
  if (timed_ok(candidate)) return *candidate.candidate_us < *current.candidate_us;
  return true;
}

std::map<Key, ResultRow> best_per_problem(const std::vector<ResultRow>& rows, size_t& cells_left_out) {
  std::map<Key, ResultRow> out;
  for (auto& r : rows) {
    if (r.kind == "full_part") {
      ++cells_left_out;
      continue;
    }
    Key k{r.problem_id, r.problem, config_of(r)};
    auto it = out.find(k);
    if (it == out.end()) out.emplace(k, r);
    else if (better(r, it->second)) it->second = r;
  }
  return out;
}

std::string side_text(const std::optional<ResultRow>& r) {
  if (!r) return "-";
  std::string s(to_string(r->status));
  if (r->candidate_us) s += fmt::format(" {:.2f} us", *r->candidate_us);
  if (r->speedup) s += fmt::format(" ({:.2f}x)", *r->speedup);
  return s;
}

}  // namespace

ResultsDiff compare_result_files(const std::filesystem::path& a, const std::filesystem::path& b, bool strict) {
  ResultsDiff d{a, b, 0, 0, {}, {}};
  auto* skipped = strict ? nullptr : &d.skipped;
  auto ra = read_results(a, nullptr, skipped), rb = read_results(b, nullptr, skipped);
  d.a_records = ra.size();
  d.b_records = rb.size();
  auto ba = best_per_problem(ra, d.cells_left_out), bb = best_per_problem(rb, d.cells_left_out);
  std::map<Key, ResultsDiffRow> rows;
  for (auto& [k, r] : ba) rows[k].a = r;
  for (auto& [k, r] : bb) rows[k].b = r;
  for (auto& [k, row] : rows) {
    std::tie(row.problem_id, row.problem, row.config) = k;
    if (row.a && row.b && row.a->candidate_us && row.b->candidate_us && *row.b->candidate_us > 0)
      row.ratio = *row.a->candidate_us / *row.b->candidate_us;
    d.rows.push_back(std::move(row));
  }
  return d;
}

std::string format_results_diff(const ResultsDiff& d, bool inspect) {
  std::string o =
      fmt::format("pkb compare  A: {} ({} records)  B: {} ({} records)\n", d.a.string(), d.a_records, d.b.string(), d.b_records);
  for (auto& sk : d.skipped) o += "  skipped " + sk + "\n";
  if (d.cells_left_out)
    o += fmt::format("  {} cell record{} of `pkb eval --full` left out (their summaries are compared)\n", d.cells_left_out,
                     d.cells_left_out == 1 ? "" : "s");
  o += "  candidate median per call, speedup over its baseline in brackets; A/B > 1: B is faster\n";
  o += fmt::format("  {:<22} {:<20} {:<32} {:<32} {}\n", "problem", "config", "A", "B", "A/B");
  for (auto& r : d.rows) {
    o += fmt::format("  {:<22} {:<20} {:<32} {:<32} {}\n", r.problem, r.config, side_text(r.a), side_text(r.b),
                     r.ratio ? fmt::format("{:.3f}", *r.ratio) : "-");
    if (!inspect) continue;
    for (auto [side, rec] : {std::pair{"A", &r.a}, std::pair{"B", &r.b}})
      if (*rec && (*rec)->status != Status::ok)
        o += fmt::format("      {} {}: {}\n", side, (*rec)->source, (*rec)->message.empty() ? "(no message)" : (*rec)->message);
  }
  return o;
}

}  // namespace pkb
