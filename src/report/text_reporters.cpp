// The two text reporters that lay out report/tables.hpp: terminal (aligned, optionally coloured)
// and Markdown (GitHub pipe tables). Both wait for finalize; records only matter to them through
// the leaderboard.
#include <fmt/format.h>

#include <algorithm>

#include "report/reporter.hpp"
#include "report/tables.hpp"

namespace pkb {

namespace {

/// Display width of UTF-8 text (code points; the tables hold no wide characters).
size_t width_of(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

const char* ansi_for(Tone t) {
  switch (t) {
    case Tone::fast: return "\033[32m";
    case Tone::slow: return "\033[33m";
    case Tone::build:
    case Tone::runtime:
    case Tone::wrong: return "\033[31m";
    case Tone::flagged: return "\033[35m";
    case Tone::harness:
    case Tone::absent: return "\033[2m";
    case Tone::plain: return "";
  }
  return "";
}

constexpr size_t kShownReplacements = 10;

class TerminalReporter : public Reporter {
 public:
  TerminalReporter(std::ostream& out, bool color) : out_(out), color_(color) {}
  void begin(const ReportContext& c) override {
    out_ << "pkb report: " << describe_inputs(c) << "\n";
    for (size_t i = 0; i < c.replaced.size() && i < kShownReplacements; ++i) out_ << "  replaced: " << c.replaced[i] << "\n";
    if (c.replaced.size() > kShownReplacements)
      out_ << "  ... and " << c.replaced.size() - kShownReplacements << " more (--format json lists them all)\n";
  }
  void record(const ResultRow&) override {}
  void finalize(const Leaderboard& board) override {
    if (board.runs.empty()) {
      out_ << "\nno `pkb eval` records to report\n";
      out_.flush();
      return;
    }
    for (const Table& t : {summary_table(board, NumberStyle::display), failures_table(board), matrix_table(board)})
      if (!t.rows.empty()) print(t);
    out_.flush();
  }

 private:
  /// Left-aligned first column, right-aligned numbers elsewhere, two spaces between columns.
  void print(const Table& t) {
    std::vector<size_t> w(t.header.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = width_of(t.header[i]);
    for (auto& row : t.rows)
      for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width_of(row[i].text));
    out_ << "\n" << t.title << "\n";
    auto cell = [&](const std::string& text, size_t i, Tone tone) {
      std::string pad(w[i] - width_of(text), ' ');
      const char* on = color_ ? ansi_for(tone) : "";
      const char* off = *on ? "\033[0m" : "";
      out_ << (i ? "  " : "") << (i ? pad : "") << on << text << off << (i ? "" : pad);
    };
    for (size_t i = 0; i < t.header.size(); ++i) cell(t.header[i], i, Tone::plain);
    out_ << "\n";
    for (auto& row : t.rows) {
      for (size_t i = 0; i < row.size(); ++i) cell(row[i].text, i, row[i].tone);
      out_ << "\n";
    }
    if (!t.note.empty()) out_ << "  " << t.note << "\n";
  }

  std::ostream& out_;
  bool color_;
};

/// Escapes the characters that would break a pipe-table cell.
std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else if (c == '\n') o += ' ';
    else o += c;
  }
  return o;
}

class MarkdownReporter : public Reporter {
 public:
  explicit MarkdownReporter(std::ostream& out) : out_(out) {}
  void begin(const ReportContext& c) override {
    out_ << "# pkb report\n\n" << md_cell(describe_inputs(c)) << "\n";
    for (auto& r : c.replaced) out_ << "\n- replaced: " << md_cell(r);
    if (!c.replaced.empty()) out_ << "\n";
  }
  void record(const ResultRow&) override {}
  void finalize(const Leaderboard& board) override {
    for (const Table& t : {summary_table(board, NumberStyle::display), failures_table(board), matrix_table(board)})
      if (!t.rows.empty()) print(t);
    out_.flush();
  }

 private:
  void print(const Table& t) {
    out_ << "\n## " << t.title << "\n\n|";
    for (auto& h : t.header) out_ << " " << md_cell(h) << " |";
    out_ << "\n|";
    for (size_t i = 0; i < t.header.size(); ++i) out_ << (i ? " ---: |" : " --- |");
    out_ << "\n";
    for (auto& row : t.rows) {
      out_ << "|";
      for (auto& c : row) out_ << " " << md_cell(c.text) << " |";
      out_ << "\n";
    }
    if (!t.note.empty()) out_ << "\n" << md_cell(t.note) << "\n";
  }

  std::ostream& out_;
};

}  // namespace

std::unique_ptr<Reporter> make_terminal_reporter(std::ostream& out, bool color) {
  return std::make_unique<TerminalReporter>(out, color);
}

std::unique_ptr<Reporter> make_markdown_reporter(std::ostream& out) { return std::make_unique<MarkdownReporter>(out); }

}  // namespace pkb
