#include "report/record.hpp"

#include <ctime>

namespace pkb {

using nlohmann::json;

namespace {

json timing_json(const SideTiming& t) {
  if (!t.measured) return nullptr;
  return json{{"median_us", t.us.median},
              {"mean_us", t.us.mean},
              {"p10_us", t.us.p10},
              {"p90_us", t.us.p90},
              {"min_us", t.us.min},
              {"max_us", t.us.max},
              {"stddev_us", t.us.stddev},
              {"iters", t.iters},
              {"warmup", t.warmup},
              {"input_groups", t.groups},
              {"span_ms", t.span_ms},
              {"host_ms", t.host_ms},
              {"driver_overhead_us", t.driver_overhead_us},
              {"per_iter_us", t.per_iter_us}};
}

json side_json(const SideInfo& s) {
  if (s.path.empty()) return nullptr;
  json j{{"path", s.path},           {"sha256", s.sha256},         {"compile_cached", s.compile_cached},
         {"compile_s", s.compile_s}, {"job_wall_s", s.job_wall_s}, {"teardown_clean", s.teardown_clean}};
  if (!s.phase_s.empty()) {
    json phases = json::array();  // in the order the phases ran
    for (auto& [phase, secs] : s.phase_s) phases.push_back({{"phase", phase}, {"s", secs}});
    j["phases"] = std::move(phases);
  }
  return j;
}

}  // namespace

json to_json(const EvalRecord& r) {
  json checks = json::array();
  for (auto& c : r.checks)
    checks.push_back(
        {{"what", c.what}, {"status", std::string(to_string(c.status))}, {"message", c.message}, {"detail", c.detail}});
  json j{
      {"schema_version", kSchemaVersion},
      {"harness_version", kHarnessVersion},
      {"kind", r.kind},
      {"timestamp", r.timestamp},
      {"argv", r.argv},
      {"problem", {{"id", r.problem_id}, {"stem", r.problem_stem}, {"name", r.problem_name}, {"spec_hash", r.spec_hash}}},
      {"baseline", side_json(r.baseline)},
      {"candidate", side_json(r.candidate)},
      {"label", r.label},
      {"sample", r.sample},
      {"config",
       {{"world", r.world},
        {"dtype", r.dtype},
        {"size", r.size_name},
        {"params", r.params},
        {"trials", r.trials},
        {"atol", r.atol},
        {"rtol", r.rtol},
        {"seed", r.seed},
        {"oversubscribed", r.oversubscribed},
        {"ranks_per_gpu", r.ranks_per_gpu},
        {"gpus", r.gpus_used}}},
      {"system", r.system},
      {"containment", r.containment},
      {"sandbox", r.sandbox},
      {"status", std::string(to_string(r.status))},
      {"message", r.message},
      {"failed_check_count", checks.size()},
      {"passed_check_count", r.checks_passed},
      {"failed_checks", checks},
      {"timing", {{"baseline", timing_json(r.baseline_timing)}, {"candidate", timing_json(r.candidate_timing)}}},
      {"speedup", r.speedup ? json(*r.speedup) : json(nullptr)},
      {"interleaved", r.interleaved},
      {"roofline", r.roofline},
      {"graph_timing", r.graph_timing},
      {"bitwise_identical", r.bitwise_identical ? json(*r.bitwise_identical) : json(nullptr)},
      {"warnings", r.warnings},
      {"wall_s", r.wall_s},
  };
  if (r.failed_rank >= 0) j["failure"] = {{"rank", r.failed_rank}, {"phase", r.failed_phase}, {"log_tail", r.log_tail}};
  if (!r.compile_log.empty()) j["compile_log"] = r.compile_log;
  if (!r.profile.is_null()) j["profile"] = r.profile;
  if (!r.full.empty()) {
    json cells = json::array();
    for (auto& c : r.full) cells.push_back(to_json(c));
    j["full"] = std::move(cells);
  }
  return j;
}

std::string FullCell::name() const { return "W=" + std::to_string(world) + " " + dtype + " " + size; }

std::string FullCell::status_text() const {
  switch (state) {
    case State::refused: return "refused";
    case State::skipped: return "skipped";
    case State::ran: break;
  }
  return std::string(to_string(status));
}

json to_json(const FullCell& c) {
  return json{{"world", c.world}, {"dtype", c.dtype}, {"size", c.size}, {"status", c.status_text()}, {"message", c.message}};
}

std::optional<FullCell> full_cell_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto world = j.find("world"), dtype = j.find("dtype"), size = j.find("size"), status = j.find("status");
  if (world == j.end() || !world->is_number_integer() || dtype == j.end() || !dtype->is_string() || size == j.end() ||
      !size->is_string() || status == j.end() || !status->is_string())
    return std::nullopt;
  FullCell c;
  c.world = world->get<int>();
  c.dtype = dtype->get<std::string>();
  c.size = size->get<std::string>();
  std::string st = status->get<std::string>();
  if (st == "refused") {
    c.state = FullCell::State::refused;
  } else if (st == "skipped") {
    c.state = FullCell::State::skipped;
  } else if (auto parsed = parse_status(st)) {
    c.status = *parsed;
  } else {
    return std::nullopt;
  }
  if (auto m = j.find("message"); m != j.end() && m->is_string()) c.message = m->get<std::string>();
  return c;
}

void EvalRecord::add_check(bool ok, std::string what, std::string message, nlohmann::json detail, Status failure_status) {
  if (ok) {
    ++checks_passed;
    return;
  }
  checks.push_back({std::move(what), false, failure_status, std::move(message), std::move(detail)});
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace pkb
