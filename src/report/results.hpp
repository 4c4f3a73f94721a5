// Reading records back: the JSON Lines that `pkb eval --json` appends, reduced to the plain row the
// report, `pkb compare` and batch resumption need. The reader is tolerant of keys that older
// records lack (label, sample, roofline: schema 1 grew them) and strict about what a record cannot
// do without (problem, status); an error names the file and line.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "report/record.hpp"

namespace pkb {

struct RecordTrust;  // report/record_mac.hpp

struct ResultRow {
  std::string source;  // "results.jsonl:12", for messages
  std::string kind;  // "eval" (baseline vs candidate), "run" (one solution alone), "sweep", "full_part"
  std::string label;  // as recorded; empty in records older than the field
  std::string run;  // the run it belongs to: label, else run_label_fallback(candidate path)
  int sample = 0;
  int problem_id = 0;
  std::string problem;  // stem, "1_allreduce"
  int world = 0;
  std::string dtype, size;
  std::string candidate_path, candidate_sha256;
  Status status = Status::harness_error;
  std::string message;
  std::optional<double> speedup;  // baseline median / candidate median
  std::optional<double> baseline_us;  // medians, microseconds per call
  std::optional<double> candidate_us;
  std::optional<double> roofline_pct;  // 100 * floor / candidate median (see roofline_percent)
  bool oversubscribed = false;  // ranks shared GPUs: a verdict, but its timings are not performance
  std::string timestamp;
  std::vector<FullCell> full;  // a `pkb eval --full` summary's cells; empty for any other record
};

/// The run a record belongs to when it carries no label: "reference" for a problem's own
/// reference.cu, else the name of the candidate file's directory, else "(unlabelled)".
std::string run_label_fallback(const std::string& candidate_path);

/// Percent of the roofline the candidate reached, from a record's `roofline` value and candidate
/// median. Prefers 100 * floor_us / measured_us (roofline/roofline.hpp; the candidate median where
/// measured_us is absent), then `pct` (a percentage), then `fraction` * 100; nullopt when the
/// record has no roofline.
std::optional<double> roofline_percent(const nlohmann::json& roofline, std::optional<double> candidate_us);

/// One record as a row. Throws Error(parse_error) naming `source` when the record lacks its
/// problem or status, or has a status pkb does not know, or a `full` that is not an array of cells.
ResultRow row_from_json(const nlohmann::json& j, const std::string& source);

/// Every record of a JSON Lines file, in file order (blank lines skipped). Throws
/// Error(not_found) for a missing file. A bad line (not JSON, or a record without its problem or
/// status) is Error(parse_error) naming file:line, or, with `skipped`, left out and listed there as
/// "file:line: why" (a file cut short by a crash keeps its other records readable).
/// With `trust`, each record's MAC is checked (report/record_mac.hpp): lines the driver did not
/// write are left out and named in trust->rejected.
std::vector<ResultRow> read_results(const std::filesystem::path& file, RecordTrust* trust = nullptr,
                                    std::vector<std::string>* skipped = nullptr);

}  // namespace pkb
