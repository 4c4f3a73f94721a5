// Test fixtures for the report tests: records as `pkb eval --json` writes them, built from a few
// fields, and a small two-run result set whose metrics are worked out by hand in metrics_test.cpp.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/results.hpp"

namespace pkb::testing {

struct Rec {
  std::string label;  // empty: an older record without the key
  std::string stem = "1_allreduce";
  int id = 1;
  int sample = 0;
  std::string status = "ok";
  std::optional<double> speedup;
  std::string candidate = "solutions/model-a/1_allreduce_s0.cu";
  int world = 4;
  std::string size = "default";
  nlohmann::json roofline = nullptr;
  std::string kind = "eval";
  std::string sha = "c0ffee";
  bool oversubscribed = false;  // ranks shared GPUs (--oversubscribe)
};

/// A JSON record with the fields a real one has (timing from the speedup: baseline 30 us).
inline nlohmann::json record_json(const Rec& r) {
  using nlohmann::json;
  json timing{{"baseline", nullptr}, {"candidate", nullptr}};
  if (r.speedup) {
    timing["baseline"] = {{"median_us", 30.0}};
    timing["candidate"] = {{"median_us", 30.0 / *r.speedup}};
  }
  json j{{"schema_version", 1},
         {"kind", r.kind},
         {"timestamp", "2026-12-01T00:00:00Z"},
         {"problem", {{"id", r.id}, {"stem", r.stem}, {"name", r.stem.substr(r.stem.find('_') + 1)}}},
         {"candidate", {{"path", r.candidate}, {"sha256", r.sha}}},
         {"config", {{"world", r.world}, {"dtype", "bf16"}, {"size", r.size}, {"oversubscribed", r.oversubscribed}}},
         {"status", r.status},
         {"message", r.status == "ok" ? "" : "it went wrong"},
         {"timing", timing},
         {"speedup", r.speedup ? json(*r.speedup) : json(nullptr)}};
  if (!r.label.empty()) {
    j["label"] = r.label;
    j["sample"] = r.sample;
    j["roofline"] = r.roofline;
  }
  return j;
}

inline ResultRow row(const Rec& r, const std::string& source = "fixture") { return row_from_json(record_json(r), source); }

/// Run "model-a" (5 samples on two problems, one harness error, one duplicate) and the reference
/// self-evaluation (older records without label). See metrics_test.cpp for the hand-worked values.
inline std::vector<ResultRow> two_run_rows() {
  auto a = [](std::string stem, int id, int sample, std::string status, std::optional<double> s) {
    Rec r;
    r.label = "model-a";
    r.stem = stem;
    r.id = id;
    r.sample = sample;
    r.status = status;
    r.speedup = s;
    r.candidate = "solutions/model-a/" + stem + "_s" + std::to_string(sample) + ".cu";
    return r;
  };
  std::vector<ResultRow> rows;
  int line = 0;
  auto add = [&](const Rec& r) { rows.push_back(row(r, "a.jsonl:" + std::to_string(++line))); };
  add(a("1_allreduce", 1, 0, "mismatch", std::nullopt));  // replaced below: the last record wins
  Rec best1 = a("1_allreduce", 1, 0, "ok", 1.5);
  best1.roofline = {{"pct", 20.0}};  // a producer's percentage
  add(best1);
  add(a("1_allreduce", 1, 1, "ok", 0.9));
  add(a("1_allreduce", 1, 2, "mismatch", std::nullopt));
  add(a("1_allreduce", 1, 3, "mismatch", std::nullopt));
  add(a("1_allreduce", 1, 4, "compile_error", std::nullopt));
  add(a("2_allgather", 2, 0, "crash", std::nullopt));
  Rec best2 = a("2_allgather", 2, 1, "ok", 3.0);
  best2.roofline = {{"floor_us", 5.0}, {"pct", 0.5}};  // floor 5 us / median 10 us: 50%, whatever pct says
  add(best2);
  add(a("2_allgather", 2, 2, "crash", std::nullopt));
  add(a("2_allgather", 2, 3, "crash", std::nullopt));
  add(a("2_allgather", 2, 4, "crash", std::nullopt));
  add(a("2_allgather", 2, 5, "harness_error", std::nullopt));  // pkb's fault: not an attempt
  Rec ref;
  ref.candidate = "problems/1_allreduce/reference.cu";
  ref.speedup = 1.0;
  add(ref);
  ref.stem = "2_allgather";
  ref.id = 2;
  ref.candidate = "problems/2_allgather/reference.cu";
  ref.speedup = 0.99;
  add(ref);
  Rec dry = ref;
  dry.kind = "run";  // `pkb run` records are left out of the report
  add(dry);
  return rows;
}

}  // namespace pkb::testing
