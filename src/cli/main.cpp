// pkb: ParallelKernelBench in C++/CUDA. See README.md, or `pkb --help`.
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/strings.hpp"
#include "report/record.hpp"

namespace {

/// A `PKB_*` value that an option's check refuses, as "--flag: why (from PKB_X=value)"; empty if none.
/// CLI11 before 2.4 refuses such a value while parsing; 2.4 and later drop it silently and keep the
/// default (CLIUtils/CLI11#1032), so that `PKB_GPUS=0` would mean "every visible GPU". pkb refuses
/// it whichever CLI11 it is built with.
std::string refused_environment_value(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())  // the one that ran: others never read the environment
    for (CLI::Option* opt : sub->get_options()) {
      std::string name = opt->get_envname();
      const char* value = name.empty() || opt->count() > 0 ? nullptr : std::getenv(name.c_str());
      if (value == nullptr || *value == '\0') continue;
      for (int i = 0;; ++i) {
        CLI::Validator* check = nullptr;
        try {
          check = opt->get_validator(i);
        } catch (const CLI::OptionNotFound&) {
          break;
        }
        std::string text = value;
        std::string why = (*check)(text);
        if (!why.empty()) return fmt::format("{}: {} (from {}={})", opt->get_name(), why, name, value);
      }
    }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pkb;
  cli::set_invocation(argc, argv);
  auto table = cli::command_table();
  // "did you mean": an unknown first word that is not a flag.
  if (argc > 1 && argv[1][0] != '-') {
    std::string word = argv[1];
    bool known = word == "help";
    std::vector<std::string> names;
    for (auto& c : table) {
      names.push_back(c.name);
      known |= c.name == word;
    }
    if (!known) {
      auto near = closest_matches(word, names);
      std::fprintf(stderr, "pkb: unknown command '%s'%s%s\nRun `pkb --help` for the list of commands.\n", word.c_str(),
                   near.empty() ? "" : "; did you mean ", near.empty() ? "" : near[0].c_str());
      return 2;
    }
    if (word == "help") argv[1] = const_cast<char*>("--help");
  }
  CLI::App app{
      "pkb — ParallelKernelBench: multi-GPU CUDA kernels evaluated against NCCL baselines.\n"
      "Each problem is a distributed workload with a framework+NCCL baseline; a solution replaces it with\n"
      "its own CUDA. pkb checks every rank's outputs on fresh secret inputs and times both on all ranks.",
      "pkb"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows each option's default value
  app.set_version_flag("--version", fmt::format("pkb {} (record schema {})", kHarnessVersion, kSchemaVersion),
                       "Print pkb's version and exit (`pkb version` also names CUDA, NCCL and the GPUs)");
  app.footer(
      "Examples:\n  pkb list\n  pkb show 1 --gpus 4\n  pkb run 1 --oracle\n"
      "  pkb eval 1 --solution solutions/examples/1_allreduce_oneshot.cu --json results.jsonl\n"
      "Exit codes: 0 ok, 1 the solution failed, 2 bad input (a bad flag or argument included), 3 harness error,\n"
      "4 unsupported, 130 interrupted.");
  std::function<int()> handler;
  for (auto& c : table) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto h = c.setup(*sub);
    sub->callback([&handler, h] { handler = h; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its message (help and version to stdout, errors to stderr); its own exit codes
    // (104-114) are not pkb's: every argument error is bad input.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (std::string why = refused_environment_value(app); !why.empty()) {
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", why.c_str());
    return 2;
  }
  install_interrupt_handlers();
  try {
    return handler ? handler() : 2;
  } catch (const Interrupted&) {
    std::fprintf(stderr, "\npkb: interrupted; the running job was stopped\n");
    return 130;
  } catch (const Error& e) {
    bool user = e.code() == Errc::invalid_argument || e.code() == Errc::not_found || e.code() == Errc::parse_error;
    std::fprintf(stderr, "%spkb: error: %s\n", isatty(2) ? "\r\033[K" : "", e.what());
    return user ? 2 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%spkb: internal error: %s\n", isatty(2) ? "\r\033[K" : "", e.what());
    return 3;
  }
}
