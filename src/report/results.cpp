#include "report/results.hpp"

#include "report/record_mac.hpp"

#include <fstream>

#include "core/error.hpp"

namespace pkb {

using nlohmann::json;

namespace {

/// j[key] as T when present and of the right kind; nullopt otherwise (older records, nulls).
std::optional<double> number_at(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string string_at(const json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& object_at(const json& j, const char* key) {
  static const json empty = json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

}  // namespace

std::string run_label_fallback(const std::string& candidate_path) {
  std::filesystem::path p(candidate_path);
  if (p.filename() == "reference.cu") return "reference";
  std::string dir = p.parent_path().filename().string();
  return dir.empty() ? "(unlabelled)" : dir;
}

std::optional<double> roofline_percent(const json& roofline, std::optional<double> candidate_us) {
  if (!roofline.is_object()) return std::nullopt;
  auto floor_us = number_at(roofline, "floor_us");
  auto measured_us = number_at(roofline, "measured_us");  // the time the producer compared with
  if (!measured_us) measured_us = candidate_us;
  if (floor_us && measured_us && *measured_us > 0) return 100.0 * *floor_us / *measured_us;
  if (auto pct = number_at(roofline, "pct")) return *pct;
  if (auto f = number_at(roofline, "fraction")) return 100.0 * *f;
  return std::nullopt;
}

ResultRow row_from_json(const json& j, const std::string& source) {
  auto bad = [&](const std::string& why) { fail(Errc::parse_error, source + ": " + why); };
  if (!j.is_object()) bad("a record must be a JSON object");
  const json& problem = object_at(j, "problem");
  ResultRow r;
  r.source = source;
  r.problem = string_at(problem, "stem");
  if (r.problem.empty()) bad("the record has no problem.stem");
  r.problem_id = static_cast<int>(number_at(problem, "id").value_or(0));
  std::string status = string_at(j, "status");
  auto st = parse_status(status);
  if (!st) bad(status.empty() ? "the record has no status" : "unknown status '" + status + "'");
  r.status = *st;
  r.kind = string_at(j, "kind");
  if (r.kind.empty()) r.kind = "eval";
  r.message = string_at(j, "message");
  r.timestamp = string_at(j, "timestamp");
  const json& cand = object_at(j, "candidate");
  r.candidate_path = string_at(cand, "path");
  r.candidate_sha256 = string_at(cand, "sha256");
  r.label = string_at(j, "label");
  r.run = r.label.empty() ? run_label_fallback(r.candidate_path) : r.label;
  r.sample = static_cast<int>(number_at(j, "sample").value_or(0));
  const json& config = object_at(j, "config");
  r.world = static_cast<int>(number_at(config, "world").value_or(0));
  r.dtype = string_at(config, "dtype");
  r.size = string_at(config, "size");
  if (auto it = config.find("oversubscribed"); it != config.end() && it->is_boolean()) r.oversubscribed = it->get<bool>();
  const json& timing = object_at(j, "timing");
  r.baseline_us = number_at(object_at(timing, "baseline"), "median_us");
  r.candidate_us = number_at(object_at(timing, "candidate"), "median_us");
  r.speedup = number_at(j, "speedup");
  if (auto it = j.find("roofline"); it != j.end()) r.roofline_pct = roofline_percent(*it, r.candidate_us);
  if (auto it = j.find("full"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) bad("`full` must be an array of cells");
    for (size_t i = 0; i < it->size(); ++i) {
      auto cell = full_cell_from_json((*it)[i]);
      if (!cell) bad("full[" + std::to_string(i) + "] needs world, dtype, size and a known status");
      r.full.push_back(std::move(*cell));
    }
  }
  return r;
}

std::vector<ResultRow> read_results(const std::filesystem::path& file, RecordTrust* trust, std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) fail(Errc::not_found, "results file " + file.string() + " does not exist");
  std::ifstream in(file);
  if (!in) fail(Errc::not_found, "cannot read results file " + file.string());
  std::vector<ResultRow> rows;
  std::vector<std::string> sources, macs;
  std::vector<bool> valid;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string source = file.string() + ":" + std::to_string(n);
    json j;
    try {
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        fail(Errc::parse_error, source + ": not a JSON record (" + e.what() + ")");
      }
      rows.push_back(row_from_json(j, source));
    } catch (const Error& e) {
      if (!skipped) throw;
      skipped->push_back(e.what());  // already "file:line: why"
      continue;
    }
    if (trust) {
      std::string mac = j.is_object() && j.contains("mac") && j["mac"].is_string() ? j["mac"].get<std::string>() : "";
      sources.push_back(source);
      valid.push_back(!mac.empty() && trust->key && record_mac(j, *trust->key) == mac);
      macs.push_back(std::move(mac));
    }
  }
  if (!trust) return rows;
  auto keep = trust->decide(sources, macs, valid);
  std::vector<ResultRow> kept;
  for (size_t i = 0; i < rows.size(); ++i)
    if (keep[i]) kept.push_back(std::move(rows[i]));
  return kept;
}

}  // namespace pkb
