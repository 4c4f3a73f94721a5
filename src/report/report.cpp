#include "report/report.hpp"

#include "core/error.hpp"
#include "report/record_mac.hpp"

namespace pkb {

LoadedReport make_report(std::vector<ResultRow> rows, std::vector<std::string> inputs) {
  PreparedRows prepared = prepare_rows(std::move(rows));
  LoadedReport r;
  r.context.inputs = std::move(inputs);
  r.context.records_read = prepared.read;
  r.context.not_eval = prepared.not_eval;
  r.context.replaced = std::move(prepared.replaced);
  r.rows = std::move(prepared.rows);
  r.board = build_leaderboard(r.rows);
  return r;
}

LoadedReport load_report(const std::vector<std::filesystem::path>& files, bool verify, bool strict) {
  if (files.empty()) fail(Errc::invalid_argument, "pkb report needs at least one results file (JSON Lines from pkb eval --json)");
  std::vector<ResultRow> all;
  std::vector<std::string> names, skipped;
  RecordTrust trust{record_key(false), {}, 0};
  for (auto& f : files) {
    auto rows = read_results(f, verify ? &trust : nullptr, strict ? nullptr : &skipped);
    all.insert(all.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    names.push_back(f.string());
  }
  LoadedReport r = make_report(std::move(all), std::move(names));
  r.context.records_read += trust.rejected.size();
  r.context.rejected = std::move(trust.rejected);
  r.context.unsigned_kept = trust.unsigned_kept;
  r.context.skipped = std::move(skipped);
  return r;
}

void emit_report(const LoadedReport& report, Reporter& sink) {
  sink.begin(report.context);
  for (auto& row : report.rows) sink.record(row);
  sink.finalize(report.board);
}

}  // namespace pkb
