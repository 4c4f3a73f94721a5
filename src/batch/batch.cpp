#include "batch/batch.hpp"

#include <algorithm>
#include <cctype>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/interrupt.hpp"
#include "core/strings.hpp"
#include "report/record_mac.hpp"
#include "report/results.hpp"

namespace pkb {

namespace fs = std::filesystem;

std::vector<ProblemEntry> select_problems(const std::vector<ProblemEntry>& all, const std::string& selection) {
  std::string s(trim(selection));
  if (s.empty() || s == "all") return all;
  std::vector<ProblemEntry> out;
  for (auto& word : split(s, ',')) {
    std::string w(trim(word));
    if (w.empty()) continue;
    const ProblemEntry& e = find_problem(all, w);  // throws invalid_argument with "did you mean"
    if (std::none_of(out.begin(), out.end(), [&](const ProblemEntry& x) { return x.stem == e.stem; })) out.push_back(e);
  }
  if (out.empty()) fail(Errc::invalid_argument, "--problems '" + selection + "' names no problem");
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

std::optional<std::pair<const ProblemEntry*, int>> parse_solution_name(const std::string& filename,
                                                                       const std::vector<ProblemEntry>& problems) {
  if (filename.size() < 4 || filename.substr(filename.size() - 3) != ".cu") return std::nullopt;
  std::string base = filename.substr(0, filename.size() - 3);
  auto find = [&](const std::string& stem) -> const ProblemEntry* {
    for (auto& p : problems)
      if (p.stem == stem) return &p;
    return nullptr;
  };
  if (auto* p = find(base)) return std::make_pair(p, 0);
  size_t s = base.rfind("_s");
  if (s == std::string::npos || s + 2 == base.size()) return std::nullopt;
  std::string digits = base.substr(s + 2);
  if (digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  if (auto* p = find(base.substr(0, s))) return std::make_pair(p, std::stoi(digits));
  return std::nullopt;
}

namespace {

bool selected_contains(const std::vector<ProblemEntry>& selected, const std::string& stem) {
  return std::any_of(selected.begin(), selected.end(), [&](const ProblemEntry& p) { return p.stem == stem; });
}

void check_one_file_per_sample(const std::vector<BatchJob>& jobs) {
  for (size_t i = 1; i < jobs.size(); ++i)
    if (jobs[i].problem.stem == jobs[i - 1].problem.stem && jobs[i].sample == jobs[i - 1].sample)
      fail(Errc::invalid_argument, jobs[i - 1].solution.string() + " and " + jobs[i].solution.string() + " are both sample " +
                                       std::to_string(jobs[i].sample) + " of " + jobs[i].problem.stem + "; keep one");
}

}  // namespace

Discovered discover_solutions(const fs::path& dir, const std::string& label, const std::vector<ProblemEntry>& all,
                              const std::vector<ProblemEntry>& selected) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(Errc::invalid_argument, "solutions directory " + dir.string() + " does not exist");
  Discovered d;
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".cu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (auto& f : files) {
    auto match = parse_solution_name(f.filename().string(), all);
    if (!match) {
      d.ignored.push_back(f.filename().string());
      continue;
    }
    if (!selected_contains(selected, match->first->stem)) continue;
    d.jobs.push_back({*match->first, f, match->second, label, sha256_hex(read_file(f))});
  }
  std::sort(d.jobs.begin(), d.jobs.end(), [](const BatchJob& a, const BatchJob& b) {
    return std::tie(a.problem.id, a.problem.stem, a.sample) < std::tie(b.problem.id, b.problem.stem, b.sample);
  });
  check_one_file_per_sample(d.jobs);
  if (d.jobs.empty())
    fail(Errc::invalid_argument, "no solution files for the selected problems in " + dir.string() +
                                     ": expected <problem stem>.cu or <problem stem>_s<k>.cu, e.g. " +
                                     (selected.empty() ? std::string("1_allreduce") : selected.front().stem) + "_s0.cu");
  return d;
}

std::set<DoneKey> finished_evaluations(const fs::path& results) {
  std::set<DoneKey> done;
  std::error_code ec;
  if (!fs::exists(results, ec)) return done;
  RecordTrust trust{record_key(false), {}, 0};  // a forged line must not mark an evaluation done
  for (auto& r : read_results(results, &trust))
    if (r.kind == "eval" && !is_not_attempt(r.status))
      done.emplace(r.problem, r.candidate_sha256, r.world, r.dtype, r.size, r.run, r.sample);
  return done;
}

BatchPlan plan_batch(const Discovered& found, BatchEvaluator& evaluator, const std::set<DoneKey>& done) {
  BatchPlan plan;
  plan.ignored = found.ignored;
  std::map<std::string, std::optional<EvalConfig>> configs;  // per problem, resolved once
  for (auto& job : found.jobs) {
    auto [it, fresh] = configs.emplace(job.problem.stem, std::nullopt);
    if (fresh) {
      try {
        it->second = evaluator.config_for(job.problem);
      } catch (const Interrupted&) {
        throw;
      } catch (const Error&) {
        // Not resolvable here: keep the job; its evaluation will say why it cannot run.
      }
    }
    const auto& c = it->second;
    bool finished = c && done.count({job.problem.stem, job.sha256, c->world, c->dtype, c->size, job.label, job.sample});
    (finished ? plan.skipped : plan.todo).push_back(job);
  }
  return plan;
}

BatchSummary run_batch(const BatchPlan& plan, BatchEvaluator& evaluator, BatchObserver& observer, const fs::path& results) {
  BatchSummary s;
  s.planned = plan.todo.size();
  s.skipped = plan.skipped.size();
  s.results = results;
  observer.planned(plan, results);
  const size_t total = plan.todo.size();
  for (size_t i = 0; i < total; ++i) {
    const BatchJob& job = plan.todo[i];
    EvalRecord rec;
    try {
      check_interrupted();
      observer.started(i, total, job);
      rec = evaluator.evaluate(job);
    } catch (const Interrupted&) {
      s.interrupted = true;  // the evaluator has stopped its job; what is recorded stays
      break;
    } catch (const std::exception& e) {
      ++s.not_run;  // one evaluation that cannot start does not stop the others
      observer.not_run(i, total, job, e.what());
      continue;
    }
    rec.label = job.label;  // the batch knows the run and sample; the evaluator need not
    rec.sample = job.sample;
    append_line(results, signed_record(to_json(rec)).dump());  // a results file that cannot be written stops the batch
    ++s.evaluated;
    ++s.statuses[rec.status];
    observer.finished(i, total, job, rec);
  }
  observer.done(s);
  return s;
}

int batch_exit_code(const BatchSummary& s) {
  if (s.interrupted) return 130;
  auto h = s.statuses.find(Status::harness_error);
  if (s.not_run > 0 || (h != s.statuses.end() && h->second > 0)) return 3;
  return 0;
}

}  // namespace pkb

namespace pkb {

std::pair<int, int> parse_shard(const std::string& text) {
  auto slash = text.find('/');
  int i = -1, n = 0;
  try {
    if (slash != std::string::npos) {
      i = std::stoi(text.substr(0, slash));
      n = std::stoi(text.substr(slash + 1));
    }
  } catch (const std::exception&) {
    n = 0;
  }
  if (n < 1 || i < 0 || i >= n) fail(Errc::invalid_argument, "--shard takes i/n with 0 <= i < n (e.g. 0/4), not '" + text + "'");
  return {i, n};
}

void keep_shard(Discovered& found, int index, int count) {
  std::vector<BatchJob> mine;
  for (size_t j = 0; j < found.jobs.size(); ++j)
    if (static_cast<int>(j % static_cast<size_t>(count)) == index) mine.push_back(std::move(found.jobs[j]));
  found.jobs = std::move(mine);
}

}  // namespace pkb
