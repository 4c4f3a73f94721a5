// The machine-readable reporters: CSV (the leaderboard, one row per run) and JSON (everything:
// inputs, each kept record as it streams in, then the runs with their metrics and cells). Also
// the format names and the factory.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "report/reporter.hpp"
#include "report/tables.hpp"

namespace pkb {

using nlohmann::json;

namespace {

/// RFC 4180: quote a field holding a comma, quote or line break; double the quotes inside.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

class CsvReporter : public Reporter {
 public:
  explicit CsvReporter(std::ostream& out) : out_(out) {}
  void begin(const ReportContext&) override {}
  void record(const ResultRow&) override {}
  /// The header depends on the runs (pass@k columns, failing statuses), so all is written here.
  void finalize(const Leaderboard& board) override {
    Table summary = summary_table(board, NumberStyle::exact);
    Table failures = failures_table(board);
    std::vector<Status> statuses;  // the failure table's status columns, without "run" and "total"
    for (size_t i = 1; i + 1 < failures.header.size(); ++i) statuses.push_back(*parse_status(failures.header[i]));
    std::vector<std::string> header = summary.header;
    for (Status st : statuses) header.push_back(std::string("failed_").append(to_string(st)));
    write_row(header);
    for (size_t r = 0; r < summary.rows.size(); ++r) {
      std::vector<std::string> cells;
      for (auto& c : summary.rows[r]) cells.push_back(c.text);
      const auto& counts = board.runs[r].failures;
      for (Status st : statuses) cells.push_back(std::to_string(counts.count(st) ? counts.at(st) : 0));
      write_row(cells);
    }
    out_.flush();
  }

 private:
  void write_row(const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) line += ',';
      line += csv_field(cells[i]);
    }
    out_ << line << "\r\n";
  }

  std::ostream& out_;
};

json opt(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

json k_values_json(const std::vector<KValue>& v) {
  json o = json::object();
  for (auto& kv : v) o[std::to_string(kv.k)] = kv.value;
  return o;
}

json cell_json(const Cell& c) {
  json statuses = json::object();
  for (auto& [s, n] : c.statuses) statuses[std::string(to_string(s))] = n;
  return {{"samples", c.samples},
          {"correct", c.correct},
          {"correct_faster", c.correct_faster},
          {"shown", std::string(to_string(c.shown()))},
          {"statuses", statuses},
          {"best_speedup", opt(c.best_speedup)},
          {"roofline_pct", opt(c.roofline_pct)}};
}

json run_json(const RunSummary& r) {
  json fast = json::object(), cells = json::object(), failures = json::object();
  for (double p : kFastPs) fast[fmt::format("{}", p)] = r.fast_at(p);
  for (auto& [stem, c] : r.cells) cells[stem] = cell_json(c);
  for (auto& [s, n] : r.failures) failures[std::string(to_string(s))] = n;
  return {{"name", r.name},
          {"label", r.key.label},
          {"world", r.key.world},
          {"dtype", r.key.dtype},
          {"size", r.key.size},
          {"problems_attempted", r.attempted},
          {"problems_correct", r.correct},
          {"min_samples", r.min_samples},
          {"max_samples", r.max_samples},
          {"pass_at_k", k_values_json(r.pass_at)},
          {"fast_1_at_k", k_values_json(r.fast1_at)},
          {"fast_p", fast},
          {"geomean_speedup", opt(r.geomean_speedup)},
          {"timed_correct_problems", r.timed_correct},
          {"median_roofline_pct", opt(r.median_roofline_pct)},
          {"roofline_measured_problems", r.roofline_measured},
          {"oversubscribed_records", r.oversubscribed},
          {"failures", failures},
          {"cells", cells}};
}

/// Streams one JSON object: the context in begin, each record as an array element, the rest in
/// finalize. The output is one valid JSON document once finalize has run.
class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(std::ostream& out) : out_(out) {}
  void begin(const ReportContext& c) override {
    out_ << "{\"schema_version\": " << kReportSchemaVersion << ",\n \"kind\": \"report\",\n \"inputs\": " << json(c.inputs).dump()
         << ",\n \"records_read\": " << c.records_read << ",\n \"not_eval\": " << c.not_eval
         << ",\n \"replaced\": " << json(c.replaced).dump() << ",\n \"rejected\": " << json(c.rejected).dump()
         << ",\n \"skipped\": " << json(c.skipped).dump() << ",\n \"records\": [";
  }
  void record(const ResultRow& r) override {
    json j{{"run", r.run},
           {"label", r.label},
           {"problem", r.problem},
           {"problem_id", r.problem_id},
           {"sample", r.sample},
           {"world", r.world},
           {"dtype", r.dtype},
           {"size", r.size},
           {"status", std::string(to_string(r.status))},
           {"speedup", opt(r.speedup)},
           {"baseline_us", opt(r.baseline_us)},
           {"candidate_us", opt(r.candidate_us)},
           {"roofline_pct", opt(r.roofline_pct)},
           {"candidate", r.candidate_path},
           {"source", r.source}};
    out_ << (first_ ? "\n  " : ",\n  ") << j.dump();
    first_ = false;
  }
  void finalize(const Leaderboard& board) override {
    json runs = json::array(), problems = json::array();
    for (auto& r : board.runs) runs.push_back(run_json(r));
    for (auto& p : board.problems) problems.push_back({{"id", p.id}, {"stem", p.stem}});
    out_ << "],\n \"problems\": " << problems.dump() << ",\n \"runs\": " << runs.dump() << "\n}\n";
    out_.flush();
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<Reporter> make_csv_reporter(std::ostream& out) { return std::make_unique<CsvReporter>(out); }
std::unique_ptr<Reporter> make_json_reporter(std::ostream& out) { return std::make_unique<JsonReporter>(out); }

std::string_view to_string(ReportFormat f) {
  switch (f) {
    case ReportFormat::terminal: return "terminal";
    case ReportFormat::markdown: return "markdown";
    case ReportFormat::csv: return "csv";
    case ReportFormat::json: return "json";
    case ReportFormat::html: return "html";
  }
  return "terminal";
}

std::optional<ReportFormat> parse_report_format(std::string_view s) {
  for (auto f : {ReportFormat::terminal, ReportFormat::markdown, ReportFormat::csv, ReportFormat::json, ReportFormat::html})
    if (to_string(f) == s) return f;
  if (s == "md") return ReportFormat::markdown;
  return std::nullopt;
}

std::unique_ptr<Reporter> make_reporter(ReportFormat format, std::ostream& out, bool color) {
  switch (format) {
    case ReportFormat::terminal: return make_terminal_reporter(out, color);
    case ReportFormat::markdown: return make_markdown_reporter(out);
    case ReportFormat::csv: return make_csv_reporter(out);
    case ReportFormat::json: return make_json_reporter(out);
    case ReportFormat::html: return make_html_reporter(out);
  }
  return make_terminal_reporter(out, color);
}

std::string describe_inputs(const ReportContext& c) {
  std::string files;
  for (auto& f : c.inputs) files += (files.empty() ? "" : ", ") + f;
  std::string s = fmt::format("{} record{} from {}", c.records_read, c.records_read == 1 ? "" : "s", files);
  if (c.not_eval)
    s +=
        fmt::format("; {} record{} not from `pkb eval` (run, sweep, full_part) left out", c.not_eval, c.not_eval == 1 ? "" : "s");
  if (!c.replaced.empty())
    s += fmt::format("; {} duplicate{} replaced (same run, problem and sample: the last record wins)", c.replaced.size(),
                     c.replaced.size() == 1 ? "" : "s");
  if (!c.rejected.empty())
    s += fmt::format("; {} line{} REJECTED as not written by pkb's driver (listed on stderr)", c.rejected.size(),
                     c.rejected.size() == 1 ? "" : "s");
  if (!c.skipped.empty())
    s += fmt::format("; {} line{} skipped as not records (listed on stderr; --strict makes it an error)", c.skipped.size(),
                     c.skipped.size() == 1 ? "" : "s");
  return s;
}

}  // namespace pkb
