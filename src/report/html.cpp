// The HTML reporter: one self-contained page (embedded CSS, inline SVG, no script, no external
// resource) with the leaderboard, failures, the problem x run matrix coloured by status and
// speedup, the three plots of report/charts.hpp, every record in a collapsed list, and the metric
// definitions. Element ids the browser test looks for: summary, matrix, fast-p, speedup, roofline.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/charts.hpp"
#include "report/record.hpp"
#include "report/reporter.hpp"
#include "report/svg.hpp"
#include "report/tables.hpp"

namespace pkb {

namespace {

constexpr const char* kCss = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 0; background: #fbfbfa; }
header, main, footer { max-width: 1240px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; border-bottom: 1px solid #ddd; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.inputs, .note, figcaption, footer { color: #666; font-size: 12.5px; }
table { border-collapse: collapse; background: #fff; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { border: 1px solid #e2e2e2; padding: 4px 6px; text-align: right; white-space: nowrap; }
th { background: #f1f1ef; font-weight: 600; white-space: normal; vertical-align: bottom; } td:first-child, th:first-child { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
.matrix td { text-align: center; min-width: 90px; } .matrix td:first-child { text-align: left; }
.tone-fast { background: #c7e9c0; } .tone-slow { background: #fff1c1; } .tone-build { background: #fdd9b5; }
.tone-runtime { background: #fcc3b0; } .tone-wrong { background: #f4a8a8; } .tone-flagged { background: #ddd6ee; }
.tone-harness { background: #e4e4e4; color: #555; } .tone-absent { color: #aaa; }
.legend span { display: inline-block; padding: 1px 8px; margin: 2px 4px 2px 0; border: 1px solid #ddd; font-size: 12px; }
figure { margin: 0; } svg { background: #fff; border: 1px solid #e2e2e2; }
dt { font-weight: 600; margin-top: 6px; } dd { margin-left: 18px; }
details summary { cursor: pointer; color: #444; } .records td:last-child { text-align: left; white-space: normal; }
footer { padding: 24px; }
)";

std::string esc(const std::string& s) { return xml_escape(s); }

/// Green, darker the faster: 1x light, 4x and beyond the darkest.
std::string fast_style(double speedup) {
  double t = std::clamp(std::log2(std::max(speedup, 1.0)) / 2.0, 0.0, 1.0);
  return fmt::format(" style=\"background: hsl(125, 45%, {:.0f}%)\"", 86 - 26 * t);
}

void table_html(std::ostream& o, const Table& t) {
  o << "<div class=\"scroll\"><table id=\"" << esc(t.id) << "\" class=\"" << esc(t.id) << "\">\n<thead><tr>";
  for (auto& h : t.header) o << "<th>" << esc(h) << "</th>";
  o << "</tr></thead>\n<tbody>\n";
  for (auto& row : t.rows) {
    o << "<tr>";
    for (auto& c : row)
      o << "<td" << (c.tone == Tone::plain ? "" : std::string(" class=\"tone-") + tone_name(c.tone) + "\"") << ">" << esc(c.text)
        << "</td>";
    o << "</tr>\n";
  }
  o << "</tbody></table></div>\n";
  if (!t.note.empty()) o << "<p class=\"note\">" << esc(t.note) << "</p>\n";
}

const char* legend_text(Tone t) {
  switch (t) {
    case Tone::fast: return "correct, faster (darker: faster)";
    case Tone::slow: return "correct, not faster or untimed";
    case Tone::build: return "compile/load error";
    case Tone::runtime: return "runtime error, crash, timeout";
    case Tone::wrong: return "mismatch";
    case Tone::flagged: return "flagged";
    case Tone::harness: return "harness error";
    case Tone::absent: return "no record";
    case Tone::plain: return "";
  }
  return "";
}

/// The matrix is laid out here rather than from matrix_table so fast cells can be shaded by speedup.
void matrix_html(std::ostream& o, const Leaderboard& b) {
  Table t = matrix_table(b);
  o << "<div class=\"scroll\"><table id=\"matrix\" class=\"matrix\">\n<thead><tr>";
  for (auto& h : t.header) o << "<th>" << esc(h) << "</th>";
  o << "</tr></thead>\n<tbody>\n";
  for (auto& p : b.problems) {
    o << "<tr><td>" << esc(p.stem) << "</td>";
    for (auto& run : b.runs) {
      auto it = run.cells.find(p.stem);
      const Cell* c = it == run.cells.end() ? nullptr : &it->second;
      TableCell cell = matrix_cell(c);
      std::string style = cell.tone == Tone::fast ? fast_style(*c->best_speedup) : "";
      o << "<td class=\"tone-" << tone_name(cell.tone) << "\"" << style << ">" << esc(cell.text) << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</tbody></table></div>\n<p class=\"legend\">";
  for (Tone tone : {Tone::fast, Tone::slow, Tone::build, Tone::runtime, Tone::wrong, Tone::flagged, Tone::harness, Tone::absent})
    o << "<span class=\"tone-" << tone_name(tone) << "\">" << legend_text(tone) << "</span>";
  o << "</p>\n<p class=\"note\">" << esc(t.note) << "</p>\n";
}

void definitions_html(std::ostream& o) {
  o << R"(<section id="definitions"><h2>Definitions</h2><dl>
<dt>pass@k</dt><dd>Per problem with n samples of which c are correct: 1 &minus; C(n&minus;c, k) / C(n, k), the chance
that k samples drawn from the n include a correct one; averaged over the problems the run attempted. Reported for k up
to the smallest n of the run.</dd>
<dt>fast_1@k</dt><dd>The same estimator where a sample counts only if it is correct and faster than the baseline.</dd>
<dt>fast_p</dt><dd>The share of attempted problems whose best correct sample has speedup &gt; p (baseline median /
candidate median from the same <code>pkb eval</code>). A correct sample that was not timed counts for no p.</dd>
<dt>geomean speedup</dt><dd>Geometric mean of each problem's best correct speedup, over problems that have one.</dd>
<dt>roofline %</dt><dd>100 &times; roofline floor / candidate median time; the median over problems of the best
correct sample's value.</dd>
<dt>attempts</dt><dd>Every record but <code>harness_error</code> (pkb's own failure, listed but never charged to the
candidate). Records of the same run, problem and sample: the last one read wins.</dd>
</dl></section>
)";
}

class HtmlReporter : public Reporter {
 public:
  explicit HtmlReporter(std::ostream& out) : out_(out) {}

  void begin(const ReportContext& c) override {
    out_ << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         << "<title>pkb report</title>\n<style>" << kCss << "</style>\n</head>\n<body>\n<header>\n<h1>pkb report</h1>\n"
         << "<p class=\"inputs\">" << esc(describe_inputs(c)) << "</p>\n</header>\n<main>\n";
    replaced_ = c.replaced;
  }

  /// Records go into a collapsed list at the end (readable without script: a <details> element).
  void record(const ResultRow& r) override {
    ++records_;
    rows_ << "<tr><td>" << esc(r.run) << "</td><td>" << esc(r.problem) << "</td><td>" << r.sample << "</td><td class=\"tone-"
          << tone_name(r.status == Status::ok && r.speedup && *r.speedup > 1 ? Tone::fast : tone_of(r.status)) << "\">"
          << to_string(r.status) << "</td><td>" << (r.speedup ? fmt::format("{:.3f}x", *r.speedup) : "-") << "</td><td>"
          << esc(r.message.size() > 160 ? r.message.substr(0, 159) + "…" : r.message) << "</td></tr>\n";
  }

  void finalize(const Leaderboard& b) override {
    out_ << "<section id=\"leaderboard\"><h2>Leaderboard</h2>\n";
    table_html(out_, summary_table(b, NumberStyle::display));
    out_ << "</section>\n";
    if (Table f = failures_table(b); !f.rows.empty()) {
      out_ << "<section><h2>" << esc(f.title) << "</h2>\n";
      table_html(out_, f);
      out_ << "</section>\n";
    }
    out_ << "<section><h2>Problems &times; runs</h2>\n";
    matrix_html(out_, b);
    out_ << "</section>\n";
    plots(b);
    out_ << "<section><h2>Records</h2>\n<details><summary>All " << records_ << " records</summary>\n"
         << "<div class=\"scroll\"><table class=\"records\"><thead><tr><th>run</th><th>problem</th><th>sample</th>"
         << "<th>status</th><th>speedup</th><th>message</th></tr></thead>\n<tbody>\n"
         << rows_.str() << "</tbody></table></div>\n";
    for (auto& r : replaced_) out_ << "<p class=\"note\">replaced: " << esc(r) << "</p>\n";
    out_ << "</details></section>\n";
    definitions_html(out_);
    out_ << "</main>\n<footer>pkb " << kHarnessVersion << ", report schema " << kReportSchemaVersion
         << "; a self-contained page: no script, nothing loaded from the network.</footer>\n</body>\n</html>\n";
    out_.flush();
  }

 private:
  void plots(const Leaderboard& b) {
    out_ << "<section><h2>fast_p</h2>\n<figure>" << fast_p_chart(b)
         << "<figcaption>Share of attempted problems with a correct sample more than p times faster than the baseline; "
            "at p = 0 it is the share solved (timed).</figcaption></figure></section>\n";
    out_ << "<section><h2>Speedup per problem</h2>\n<figure class=\"scroll\">" << speedup_chart(b)
         << "<figcaption>Best correct speedup per problem and run, log scale; bars above the dashed line are faster "
            "than the baseline; &times; marks a problem without a correct timed sample.</figcaption></figure></section>\n";
    out_ << "<section><h2>Roofline</h2>\n<figure class=\"scroll\">" << roofline_chart(b)
         << "<figcaption>Achieved percentage of the roofline floor (100% = at the hardware limit) of the best correct "
            "sample; n/m: not measured.</figcaption></figure></section>\n";
  }

  std::ostream& out_;
  std::ostringstream rows_;
  size_t records_ = 0;
  std::vector<std::string> replaced_;
};

}  // namespace

std::unique_ptr<Reporter> make_html_reporter(std::ostream& out) { return std::make_unique<HtmlReporter>(out); }

}  // namespace pkb
