// `pkb compare A.jsonl B.jsonl`: two result files side by side, one row per problem and
// configuration (PKB's compare_performance). Per side the record shown is the fastest correct one
// for that problem and configuration, else the last one read; ratio = A's candidate median / B's,
// so a ratio above 1 means B is faster. The cells of a `pkb eval --full` (records of kind full_part)
// are left out: each run's summary record stands for them.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/results.hpp"

namespace pkb {

struct ResultsDiffRow {
  int problem_id = 0;
  std::string problem;  // stem
  std::string config;  // "W=4 bf16 default"
  std::optional<ResultRow> a, b;
  std::optional<double> ratio;  // a.candidate_us / b.candidate_us, when both are timed
};

struct ResultsDiff {
  std::filesystem::path a, b;
  size_t a_records = 0, b_records = 0;
  size_t cells_left_out = 0;  // `pkb eval --full` cells (kind full_part): their summaries stand for them
  std::vector<ResultsDiffRow> rows;  // by problem id, then configuration
  std::vector<std::string> skipped;  // "file:line: why": lines that are not records (unless strict)
};

/// Reads both files and pairs their records. A line that is not a record is skipped and listed, or
/// with `strict` an error naming file:line.
ResultsDiff compare_result_files(const std::filesystem::path& a, const std::filesystem::path& b, bool strict = false);

/// The table; with `inspect`, each failing record's message under its row.
std::string format_results_diff(const ResultsDiff& d, bool inspect);

}  // namespace pkb
