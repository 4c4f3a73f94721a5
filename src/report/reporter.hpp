// Reporters: one sink per output format, each writing to a stream it is given. The lifecycle is
// google/benchmark's: begin(context) once, record(row) for every kept record, finalize(board)
// once with the aggregate computed by build_leaderboard. A reporter lays out; it never computes a
// metric and never chooses where its output goes.
//
//   terminal   aligned tables (optionally coloured) for a terminal
//   markdown   the same tables as GitHub Markdown
//   csv        the leaderboard, one row per run, full precision (RFC 4180 quoting)
//   json       schema-versioned: inputs, every kept record as a row, runs with metrics and cells
//   html       one self-contained page: tables, a coloured matrix and SVG plots (report/html.cpp)
#pragma once
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "report/leaderboard.hpp"
#include "report/results.hpp"

namespace pkb {

inline constexpr int kReportSchemaVersion = 1;

/// What was read, for the header of every format.
struct ReportContext {
  std::vector<std::string> inputs;  // the results files, as given
  size_t records_read = 0;
  size_t not_eval = 0;  // records of other kinds (run, sweep, full_part) left out
  std::vector<std::string> replaced;  // duplicates: which record replaced which (last wins)
  std::vector<std::string> rejected;  // "file:line: why": lines pkb's driver did not write (record_mac.hpp)
  std::vector<std::string> skipped;  // "file:line: why": lines that are not records (left out unless --strict)
  size_t unsigned_kept = 0;  // records without a MAC, kept (files written before records were signed)
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  /// Once, before any record.
  virtual void begin(const ReportContext& context) = 0;
  /// Once per kept record, in input order.
  virtual void record(const ResultRow& row) = 0;
  /// Once, after the last record: writes whatever is left and flushes.
  virtual void finalize(const Leaderboard& board) = 0;
};

enum class ReportFormat { terminal, markdown, csv, json, html };

std::string_view to_string(ReportFormat f);
std::optional<ReportFormat> parse_report_format(std::string_view s);

/// A reporter of `format` writing to `out` (which must outlive it). `color` only affects terminal.
std::unique_ptr<Reporter> make_reporter(ReportFormat format, std::ostream& out, bool color = false);

std::unique_ptr<Reporter> make_terminal_reporter(std::ostream& out, bool color);
std::unique_ptr<Reporter> make_markdown_reporter(std::ostream& out);
std::unique_ptr<Reporter> make_csv_reporter(std::ostream& out);
std::unique_ptr<Reporter> make_json_reporter(std::ostream& out);
std::unique_ptr<Reporter> make_html_reporter(std::ostream& out);

/// One line for headers: "12 records from a.jsonl, b.jsonl; 1 duplicate replaced (last wins)".
std::string describe_inputs(const ReportContext& context);

}  // namespace pkb
