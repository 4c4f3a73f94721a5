// `pkb report` (leaderboard from result files, in any reporter's format, plus an HTML page) and
// `pkb compare` (two artifact directories, or two result files, side by side).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "compare/artifacts.hpp"
#include "compare/results_diff.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "report/report.hpp"

namespace pkb::cli {

namespace fs = std::filesystem;

namespace {

struct ReportFlags {
  std::vector<std::string> files;
  std::string format = "terminal", out, html;
  bool no_verify = false, strict = false;
};

/// Renders `report` with one reporter into `path` (atomically), or to stdout when path is empty.
void render_to(const LoadedReport& report, ReportFormat format, const std::string& path) {
  if (path.empty()) {
    auto sink = make_reporter(format, std::cout, format == ReportFormat::terminal && isatty(1));
    emit_report(report, *sink);
    return;
  }
  std::ostringstream buf;
  auto sink = make_reporter(format, buf, false);
  emit_report(report, *sink);
  write_file_atomic(path, buf.str());
  std::fprintf(stderr, "pkb report: %s written to %s\n", std::string(to_string(format)).c_str(), path.c_str());
}

int run_report(const ReportFlags& f) {
  auto format = parse_report_format(f.format);
  if (!format) fail(Errc::invalid_argument, "unknown --format '" + f.format + "' (terminal, markdown, csv, json, html)");
  std::vector<fs::path> files(f.files.begin(), f.files.end());
  LoadedReport report = load_report(files, !f.no_verify, f.strict);
  for (auto& r : report.context.skipped) std::fprintf(stderr, "pkb report: skipped %s\n", r.c_str());
  for (auto& r : report.context.rejected) std::fprintf(stderr, "pkb report: rejected %s\n", r.c_str());
  render_to(report, *format, f.out);
  if (!f.html.empty()) render_to(report, ReportFormat::html, f.html);
  return 0;
}

struct CompareFlags {
  std::string a, b;
  bool inspect = false, strict = false;
  double atol = 1e-2, rtol = 1e-2;
  GivenTolerance given{false, false};  // which of --atol and --rtol the command line set
  int values = 8;
};

int run_compare(const CompareFlags& f) {
  std::error_code ec;
  for (auto* p : {&f.a, &f.b})
    if (!p->empty() && !fs::exists(*p, ec)) fail(Errc::invalid_argument, *p + " does not exist");
  if (f.b.empty()) {
    if (!f.inspect) fail(Errc::invalid_argument, "pkb compare needs two paths (or one with --inspect)");
    std::cout << format_inspection(f.a, f.values);
    return 0;
  }
  bool dir_a = fs::is_directory(f.a, ec), dir_b = fs::is_directory(f.b, ec);
  if (dir_a != dir_b)
    fail(Errc::invalid_argument, "compare two artifact directories (from --dump) or two results files (from --json); " +
                                     (dir_a ? f.a : f.b) + " is a directory but " + (dir_a ? f.b : f.a) + " is not");
  if (!dir_a) {
    for (auto* p : {&f.a, &f.b})
      if (fs::path(*p).extension() == ".safetensors")
        fail(Errc::invalid_argument, *p + " is one artifact file: compare the directories that hold them");
    std::cout << format_results_diff(compare_result_files(f.a, f.b, f.strict), f.inspect);
    return 0;
  }
  if (f.inspect) std::cout << "A:\n" << format_inspection(f.a, f.values) << "B:\n" << format_inspection(f.b, f.values);
  ArtifactComparison c = compare_artifact_dirs(f.a, f.b, {f.atol, f.rtol}, f.given);
  std::cout << format_artifact_comparison(c);
  return c.all_agree() ? 0 : 1;
}

}  // namespace

Command report_command() {
  return {
      "report", "Leaderboard from result files: pass@k, fast_p, geomean speedup, roofline %, matrix, HTML", [](CLI::App& sub) {
        auto f = std::make_shared<ReportFlags>();
        sub.add_option("results", f->files, "JSON Lines files from pkb eval --json (several runs may share a file)")->required();
        sub.add_option("--format,-f", f->format, "terminal, markdown, csv, json or html")->envname("PKB_REPORT_FORMAT");
        sub.add_option("--out,-o", f->out, "Write the --format output to this file instead of stdout");
        sub.add_option("--html", f->html, "Also write a self-contained HTML page with plots to this file");
        sub.add_flag("--no-verify", f->no_verify, "Keep records whose MAC does not verify (results from another machine's pkb)");
        sub.add_flag("--strict", f->strict,
                     "A line that is not a record is an error (default: skipped with a warning naming file:line)");
        return std::function<int()>([f] { return run_report(*f); });
      }};
}

Command compare_command() {
  return {"compare", "Compare two --dump artifact directories (per rank, trial, tensor) or two result files", [](CLI::App& sub) {
            auto f = std::make_shared<CompareFlags>();
            sub.add_option("a", f->a, "Artifact directory (A: the expected side) or results file")->required();
            sub.add_option("b", f->b, "Artifact directory (B: the side checked) or results file");
            sub.add_flag("--inspect", f->inspect, "Print shapes, dtypes and sample values (one path is enough)");
            auto* atol = sub.add_option("--atol", f->atol,
                                        "Absolute tolerance: |b - a| <= atol + rtol * |a| (default 1e-2); given, it replaces "
                                        "the atol A's dump states per output (exact outputs stay exact)")
                             ->check(at_least(0));
            auto* rtol = sub.add_option("--rtol", f->rtol, "Relative tolerance (default 1e-2; as --atol)")->check(at_least(0));
            sub.add_option("--values", f->values, "With --inspect: how many leading values to print per tensor");
            sub.add_flag("--strict", f->strict,
                         "Results files: a line that is not a record is an error (default: skipped, listed)");
            return std::function<int()>([f, atol, rtol] {
              f->given = {atol->count() > 0, rtol->count() > 0};
              return run_compare(*f);
            });
          }};
}

}  // namespace pkb::cli
