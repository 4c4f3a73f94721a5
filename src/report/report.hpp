// `pkb report` as a library: read result files, set duplicates and non-eval records aside,
// aggregate once, then feed any number of reporters the same data.
#pragma once
#include <filesystem>
#include <vector>

#include "report/leaderboard.hpp"
#include "report/reporter.hpp"
#include "report/results.hpp"

namespace pkb {

struct LoadedReport {
  ReportContext context;
  std::vector<ResultRow> rows;  // kept records, in input order
  Leaderboard board;
};

/// Reads the files in order (a later file's record replaces an earlier one of the same run,
/// problem and sample). Throws Error(invalid_argument) when no file is given, and the reader's
/// errors (not_found, parse_error naming file:line).
/// With `verify`, lines without a valid MAC (report/record_mac.hpp) are rejected and listed.
/// With `strict`, a line that is not a record is an error; else it is left out and listed in
/// context.skipped.
LoadedReport load_report(const std::vector<std::filesystem::path>& files, bool verify = true, bool strict = false);

/// Builds the report from rows already in memory (tests, other tools); `inputs` names their origin.
LoadedReport make_report(std::vector<ResultRow> rows, std::vector<std::string> inputs);

/// Runs one reporter's lifecycle: begin, every kept record, finalize.
void emit_report(const LoadedReport& report, Reporter& sink);

}  // namespace pkb
