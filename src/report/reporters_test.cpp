// Every reporter's output, checked line by line against patterns (google/benchmark's
// output_test idea), on the hand-worked two-run example of metrics_test.cpp; and the SVG writer.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "report/charts.hpp"
#include "report/report.hpp"
#include "report/report_fixtures.hpp"
#include "report/svg.hpp"

namespace pkb {
namespace {

std::string render(ReportFormat f, bool color = false, std::vector<ResultRow> rows = testing::two_run_rows()) {
  std::ostringstream out;
  auto sink = make_reporter(f, out, color);
  emit_report(make_report(std::move(rows), {"a.jsonl"}), *sink);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    out.push_back(l);
  }
  return out;
}

/// Every pattern must match a whole line, in order (other lines may come between).
void expect_lines_in_order(const std::string& output, const std::vector<std::string>& patterns) {
  auto lines = lines_of(output);
  size_t at = 0;
  for (auto& p : patterns) {
    std::regex re(p);
    while (at < lines.size() && !std::regex_match(lines[at], re)) ++at;
    ASSERT_LT(at, lines.size()) << "no line matches /" << p << "/ (in order) in:\n" << output;
    ++at;
  }
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(TerminalReporter, TablesWithTheHandWorkedNumbers) {
  std::string out = render(ReportFormat::terminal);
  expect_lines_in_order(
      out,
      {
          R"(pkb report: 15 records from a\.jsonl; 1 record not from `pkb eval` \(run, sweep, full_part\) left out; 1 duplicate replaced .*last record wins.*)",
          R"(  replaced: model-a / 1_allreduce / sample 0: a\.jsonl:1 replaced by a\.jsonl:2)",
          R"(Leaderboard)",
          R"(run\s+problems\s+correct\s+samples\s+pass@1\s+pass@2\s+pass@3\s+pass@5\s+fast_1@1\s+fast_1@2\s+fast_1@3\s+fast_1@5\s+fast_0\s+fast_1\s+fast_1\.5\s+fast_2\s+geomean speedup\s+median roofline %)",
          R"(model-a\s+2\s+2\s+5\s+0\.300\s+0\.550\s+0\.750\s+1\.000\s+0\.200\s+\S+\s+\S+\s+\S+\s+1\.000\s+1\.000\s+0\.500\s+0\.500\s+2\.12x\s+35\.0)",
          R"(reference\s+2\s+2\s+1\s+1\.000\s+-\s+-\s+-\s+0\.000\s+-\s+-\s+-\s+1\.000\s+0\.000\s+0\.000\s+0\.000\s+0\.99x\s+-)",
          R"(  All runs at W=4 bf16 default\. pass@k: unbiased estimator.*)",
          R"(Failures \(records per status\))",
          R"(run\s+compile_error\s+mismatch\s+crash\s+harness_error\s+total)",
          R"(model-a\s+1\s+2\s+4\s+1\s+8)",
          R"(  harness_error is pkb's own failure.*)",
          R"(Problems x runs)",
          R"(problem\s+model-a\s+reference)",
          R"(1_allreduce\s+2/5 ok 1\.50x\s+ok 1\.00x)",
          R"(2_allgather\s+1/5 ok 3\.00x\s+ok 0\.99x)",
      });
  EXPECT_EQ(out.find("\033["), std::string::npos) << "no colour unless asked";
  std::string colored = render(ReportFormat::terminal, true);
  EXPECT_NE(colored.find("\033[32m2/5 ok 1.50x\033[0m"), std::string::npos) << colored;
}

TEST(TerminalReporter, ConfigColumnOnlyWhenRunsDiffer) {
  testing::Rec a;
  a.label = "m";
  a.speedup = 1.2;
  testing::Rec b = a;
  b.world = 2;
  std::string out = render(ReportFormat::terminal, false, {testing::row(a), testing::row(b)});
  expect_lines_in_order(out, {R"(run\s+config\s+problems.*)", R"(m \(W=4 bf16 default\)\s+W=4 bf16 default\s+1\s+1\s+1\s.*)",
                              R"(m \(W=2 bf16 default\)\s+W=2 bf16 default\s+1\s+1\s+1\s.*)"});
  EXPECT_EQ(out.find("All runs at"), std::string::npos);
}

TEST(TerminalReporter, SaysSoWhenThereIsNothingToReport) {
  testing::Rec dry;
  dry.kind = "run";
  std::string out = render(ReportFormat::terminal, false, {testing::row(dry)});
  expect_lines_in_order(out,
                        {R"(pkb report: 1 record from a\.jsonl; 1 record not from `pkb eval` \(run, sweep, full_part\) left out)",
                         R"(no `pkb eval` records to report)"});
}

TEST(MarkdownReporter, PipeTables) {
  std::string out = render(ReportFormat::markdown);
  expect_lines_in_order(out, {
                                 R"(# pkb report)",
                                 R"(- replaced: model-a / 1_allreduce / sample 0: .*)",
                                 R"(## Leaderboard)",
                                 R"(\| run \| problems \| correct \| samples \| pass@1 \|.*\| median roofline % \|)",
                                 R"(\| --- \|( ---: \|)+)",
                                 R"(\| model-a \| 2 \| 2 \| 5 \| 0\.300 \| 0\.550 \|.*\| 2\.12x \| 35\.0 \|)",
                                 R"(## Problems x runs)",
                                 R"(\| 2_allgather \| 1/5 ok 3\.00x \| ok 0\.99x \|)",
                             });
  testing::Rec odd;
  odd.label = "a|b";
  EXPECT_NE(render(ReportFormat::markdown, false, {testing::row(odd)}).find("| a\\|b |"), std::string::npos);
}

TEST(CsvReporter, OneRowPerRunAtFullPrecision) {
  std::string out = render(ReportFormat::csv);
  auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0],
            "run,config,problems,correct,samples,pass@1,pass@2,pass@3,pass@5,fast_1@1,fast_1@2,fast_1@3,fast_1@5,"
            "fast_0,fast_1,fast_1.5,fast_2,geomean speedup,median roofline %,failed_compile_error,failed_mismatch,"
            "failed_crash,failed_harness_error");
  EXPECT_TRUE(std::regex_match(
      lines[1],
      std::regex(
          R"(model-a,W=4 bf16 default,2,2,5,0\.(3|29999)\d*,0\.55\d*,0\.75\d*,1,0\.(2|19999)\d*,0\.4\d*,0\.6\d*,1,1,1,0\.5,0\.5,2\.1213\d*,35,1,2,4,1)")))
      << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], std::regex(R"(reference,W=4 bf16 default,2,2,1,1,,,,0,,,,1,0,0,0,0\.99\d*,,0,0,0,0)")))
      << lines[2];
  EXPECT_NE(out.find("\r\n"), std::string::npos) << "RFC 4180 line ends";
  testing::Rec odd;
  odd.label = "model, \"v2\"";
  EXPECT_NE(render(ReportFormat::csv, false, {testing::row(odd)}).find("\"model, \"\"v2\"\"\",W=4"), std::string::npos);
}

TEST(JsonReporter, OneDocumentWithRecordsRunsAndCells) {
  auto j = nlohmann::json::parse(render(ReportFormat::json));
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  EXPECT_EQ(j["kind"], "report");
  EXPECT_EQ(j["records_read"], 15);
  EXPECT_EQ(j["not_eval"], 1);
  EXPECT_EQ(j["replaced"].size(), 1u);
  ASSERT_EQ(j["records"].size(), 13u);
  EXPECT_EQ(j["records"][0]["run"], "model-a");
  EXPECT_EQ(j["records"][0]["source"], "a.jsonl:2");
  ASSERT_EQ(j["runs"].size(), 2u);
  auto& a = j["runs"][0];
  EXPECT_NEAR(a["pass_at_k"]["1"].get<double>(), 0.3, 1e-12);
  EXPECT_NEAR(a["fast_p"]["1.5"].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(a["median_roofline_pct"].get<double>(), 35.0, 1e-12);
  EXPECT_EQ(a["cells"]["2_allgather"]["statuses"]["harness_error"], 1);
  EXPECT_EQ(a["cells"]["2_allgather"]["samples"], 5);
  EXPECT_TRUE(j["runs"][1]["geomean_speedup"].is_number());
  EXPECT_TRUE(j["runs"][1]["median_roofline_pct"].is_null());
  EXPECT_EQ(j["problems"][1]["stem"], "2_allgather");
}

TEST(HtmlReporter, SelfContainedPageWithTablesAndPlots) {
  testing::Rec odd;
  odd.label = "<b>&co";
  odd.speedup = 1.1;
  auto rows = testing::two_run_rows();
  rows.push_back(testing::row(odd));
  std::string out = render(ReportFormat::html, false, rows);
  EXPECT_EQ(out.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* want : {"<table id=\"summary\"", "<table id=\"matrix\"", "id=\"fast-p\"", "id=\"speedup\"", "id=\"roofline\"",
                           "<details>", "id=\"definitions\"", "&lt;b&gt;&amp;co", "</html>"})
    EXPECT_NE(out.find(want), std::string::npos) << want;
  EXPECT_EQ(count(out, "<svg"), 3u);
  EXPECT_EQ(count(out, "</svg>"), 3u);
  EXPECT_EQ(out.find("<b>&co"), std::string::npos) << "labels are escaped";
  EXPECT_EQ(out.find("<script"), std::string::npos);
  EXPECT_EQ(out.find("href="), std::string::npos) << "nothing to load";
  EXPECT_EQ(out.find("src="), std::string::npos) << "nothing to load";
  EXPECT_NE(out.find("model-a / 2_allgather: 3.00x"), std::string::npos) << "bar tooltips";
  EXPECT_NE(out.find("model-a / 2_allgather: 50.0% of roofline"), std::string::npos) << "scatter tooltips";
}

TEST(Svg, EscapesAndWritesElements) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  Svg s(100, 50, "plot", "A & B");
  s.line(0, 0, 10, 10, "#000", 1, "4 3").rect(1, 2, 3, 4, "red", "tip <1>").text(5, 5, "x<y", 12, "middle", -40);
  s.polyline({{0, 0}, {1.25, 2}}, "blue");
  std::string out = s.str();
  for (const char* want :
       {R"(id="plot")", R"(viewBox="0 0 100 50")", "<title>A &amp; B</title>", R"(stroke-dasharray="4 3")",
        "<title>tip &lt;1&gt;</title>", ">x&lt;y</text>", R"x(transform="rotate(-40 5.0 5.0)")x", R"(points="0.0,0.0 1.2,2.0")"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
}

TEST(Charts, RooflineSaysNotMeasuredWhenNoRecordHasOne) {
  testing::Rec r;
  r.speedup = 1.0;
  Leaderboard b = make_report({testing::row(r)}, {"x"}).board;
  EXPECT_NE(roofline_chart(b).find("roofline not measured"), std::string::npos);
  Leaderboard measured = make_report(testing::two_run_rows(), {"x"}).board;
  std::string chart = roofline_chart(measured);
  EXPECT_EQ(chart.find("roofline not measured"), std::string::npos);
  EXPECT_EQ(count(chart, "<circle"), 2u);  // model-a's two measured problems
}

TEST(Charts, FastPHasOneStepLinePerRun) {
  Leaderboard b = make_report(testing::two_run_rows(), {"x"}).board;
  std::string chart = fast_p_chart(b);
  EXPECT_EQ(count(chart, "<polyline"), 2u);
  // model-a: 1.0 up to p = 1.5, then 0.5 up to 3.0, then 0: drops at x(1.5) and x(3.0).
  EXPECT_NE(chart.find(run_color(0)), std::string::npos);
  EXPECT_NE(chart.find(run_color(1)), std::string::npos);
}

}  // namespace
}  // namespace pkb
