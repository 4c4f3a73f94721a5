#include "gen/generate.hpp"

#include <fmt/format.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/interrupt.hpp"
#include "llm/extract.hpp"
#include "report/record.hpp"

namespace pkb {

using nlohmann::json;

std::string GenerateSummary::line() const {
  return fmt::format("{}/{} done: {} ok, {} no code, {} failed, {} kept", done, total, ok, no_code, failed, kept);
}

std::string sample_name(const std::string& stem, int sample) { return stem + "_s" + std::to_string(sample); }

bool sample_is_final(const fs::path& run_dir, const std::string& stem, int sample) {
  fs::path rec = run_dir / (sample_name(stem, sample) + ".json");
  std::error_code ec;
  if (!fs::exists(rec, ec)) return false;
  try {
    auto status = parse_llm_status(json::parse(read_file(rec)).value("status", ""));
    if (status == LlmStatus::no_code_block) return true;
    return status == LlmStatus::ok && fs::exists(run_dir / (sample_name(stem, sample) + ".cu"), ec);
  } catch (const std::exception&) {
    return false;  // an unreadable record is regenerated
  }
}

std::string generated_source(const std::string& code, const std::string& provenance) {
  return "// pkb-generated: " + provenance + "\n#line 1\n" + code;
}

namespace {

/// Asks the model once and writes the sample's files (code first, record last).
SampleResult generate_one(ChatModel& model, const ProblemPrompt& p, int k, const GenerateOptions& o) {
  std::string name = sample_name(p.stem, k);
  Completion c = model.complete({p.prompt.system, {{ChatMessage::Role::user, p.prompt.user}}});
  json rec{{"schema_version", 1},
           {"kind", "generation_sample"},
           {"run_name", o.run_name},
           {"problem", p.stem},
           {"sample", k},
           {"timestamp", now_iso8601()},
           {"provider", to_string(o.llm.provider)},
           {"model", o.llm.model},
           {"model_reported", c.model},
           {"base_url", o.llm.endpoint()},
           {"parameters", o.llm.parameters()},
           {"prompt_sha256", p.prompt.sha256()},
           {"prompt_path", "prompts/" + p.stem + ".md"},
           {"prompt_config", p.config},
           {"reply", c.text},
           {"finish_reason", c.finish_reason},
           {"code_path", nullptr},
           {"usage", to_json(c.usage)},
           {"http_code", c.http_code},
           {"attempts", c.attempts},
           {"seconds", c.seconds}};
  fs::path cu = o.run_dir / (name + ".cu");
  std::error_code ec;
  if (c.status == LlmStatus::ok) {
    ExtractedCode x = extract_code(c.text);
    rec["strategy"] = x.strategy;
    if (!x.code) {
      c.status = LlmStatus::no_code_block;
      c.message = "the reply has no ```cu/```cuda/```cpp block (nor an untagged block defining pkb_run)";
    } else {
      std::string file = generated_source(*x.code, fmt::format("{}/{}, problem {}, sample {}; record {}.json",
                                                               to_string(o.llm.provider), o.llm.model, p.stem, k, name));
      write_file_atomic(cu, file);
      rec["code_path"] = name + ".cu";
      rec["code_sha256"] = sha256_hex(*x.code);
      rec["file_sha256"] = sha256_hex(file);
      rec["code_lang"] = x.lang;
      rec["code_terminated"] = x.terminated;
    }
  }
  if (rec["code_path"].is_null()) fs::remove(cu, ec);  // never leave an older sample's code behind
  rec["status"] = to_string(c.status);
  rec["message"] = c.message;
  write_file_atomic(o.run_dir / (name + ".json"), rec.dump(2) + "\n");
  return {p.stem, k, c.status, c.message, false, c.seconds};
}

void write_run_files(const std::vector<ProblemPrompt>& problems, const GenerateOptions& o) {
  json stems = json::array(), configs = json::object();
  for (auto& p : problems) {
    write_file_atomic(o.run_dir / "prompts" / (p.stem + ".md"), p.prompt.to_text());
    stems.push_back(p.stem);
    configs[p.stem] = p.config;
  }
  json run{{"schema_version", 1},
           {"kind", "generation_run"},
           {"run_name", o.run_name},
           {"timestamp", now_iso8601()},
           {"provider", to_string(o.llm.provider)},
           {"model", o.llm.model},
           {"base_url", o.llm.endpoint()},
           {"parameters", o.llm.parameters()},
           {"samples", o.samples},
           {"problems", stems},
           {"prompt_configs", configs}};
  write_file_atomic(o.run_dir / "run.json", run.dump(2) + "\n");
}

}  // namespace

GenerateSummary run_generate(const std::vector<ProblemPrompt>& problems, const GenerateOptions& opts,
                             const ModelFactory& make_model, const SampleProgress& progress) {
  if (opts.samples < 1) fail(Errc::invalid_argument, "--samples must be at least 1");
  write_run_files(problems, opts);
  struct Job {
    const ProblemPrompt* p;
    int k;
  };
  std::vector<Job> jobs;
  for (auto& p : problems)
    for (int k = 0; k < opts.samples; ++k) jobs.push_back({&p, k});
  GenerateSummary sum;
  sum.total = static_cast<int>(jobs.size());
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first_error;
  auto report = [&](const SampleResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    ++sum.done;
    if (r.kept) ++sum.kept;
    else if (r.status == LlmStatus::ok) ++sum.ok;
    else if (r.status == LlmStatus::no_code_block) ++sum.no_code;
    else ++sum.failed;
    if (progress) progress(r, sum);
  };
  auto worker = [&] {
    try {
      std::unique_ptr<ChatModel> model;
      for (size_t i; !stop && (i = next++) < jobs.size();) {
        check_interrupted();
        const Job& j = jobs[i];
        if (sample_is_final(opts.run_dir, j.p->stem, j.k)) {
          report({j.p->stem, j.k, LlmStatus::ok, "", true, 0});
          continue;
        }
        if (!model) model = make_model();
        report(generate_one(*model, *j.p, j.k, opts));
      }
    } catch (...) {  // Interrupted, or a file that cannot be written: stop every worker
      std::lock_guard<std::mutex> lock(mu);
      if (!first_error) first_error = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> pool;
  int n = std::max(1, std::min<int>(opts.concurrency, static_cast<int>(jobs.size())));
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return sum;
}

}  // namespace pkb
