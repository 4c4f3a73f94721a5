// The report's tables as plain data (header, rows of text cells with a tone), built once from a
// Leaderboard. Which columns exist and how a number is written is decided here; the terminal,
// Markdown, CSV and HTML reporters only lay the cells out in their own syntax.
#pragma once
#include <string>
#include <vector>

#include "report/leaderboard.hpp"

namespace pkb {

/// What a cell means, for colour (terminal, HTML); reporters without colour ignore it.
enum class Tone {
  plain,
  fast,  // correct and faster than the baseline
  slow,  // correct, not faster (or not timed)
  build,  // compile_error, load_error
  runtime,  // runtime_error, crash, timeout
  wrong,  // mismatch
  flagged,  // passed but implausible
  harness,  // pkb's own failure
  absent,  // no record
};

/// The tone of a failing or passing status (ok -> slow; the caller upgrades to fast).
Tone tone_of(Status s);
/// CSS class / legend name of a tone: "fast", "slow", "build", ...
const char* tone_name(Tone t);

struct TableCell {
  std::string text;
  Tone tone = Tone::plain;
};

struct Table {
  std::string id;  // "summary", "failures", "matrix": anchors and CSS hooks
  std::string title;  // "Leaderboard"
  std::vector<std::string> header;
  std::vector<std::vector<TableCell>> rows;
  std::string note;  // one line under the table; may be empty
};

/// display: rounded for reading (0.417, 1.23x); exact: full precision, no units (CSV).
enum class NumberStyle { display, exact };

/// One row per run: config (always when exact; for display only when the runs differ in it, else
/// the note names it), problems, correct, samples, pass@k, fast_1@k (when any run has several
/// samples), fast_p for kFastPs, geometric-mean speedup, median roofline %.
Table summary_table(const Leaderboard& board, NumberStyle style);
/// One row per run with a failing record: record counts per failing status.
Table failures_table(const Leaderboard& board);
/// Problems down, runs across: "ok 1.23x", "2/5 ok 1.31x", "mismatch", "-" (no record).
Table matrix_table(const Leaderboard& board);

/// The text of one matrix cell.
TableCell matrix_cell(const Cell* cell);

}  // namespace pkb
