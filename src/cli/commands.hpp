// The subcommand table: each row holds a name, one line of help, a function that declares its
// flags (each flag once, with its PKB_* environment override) and a handler. `pkb help`, the
// "did you mean" suggestion and dispatch all come from this table.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pkb::cli {

struct Command {
  std::string name;
  std::string help;
  /// Declares the flags on `sub` and returns the handler to run if this subcommand is chosen.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

/// Every subcommand, in the order `pkb --help` lists them.
std::vector<Command> command_table();

// One function per command family (each in its own file).
Command list_command();
Command show_command();
Command run_command();
Command eval_command();
Command build_command();
Command version_command();
Command calibrate_command();
Command sweep_command();
Command report_command();  // cmd_report.cpp
Command compare_command();  // cmd_report.cpp
Command prompt_command();  // cmd_prompt.cpp
Command generate_command();  // cmd_generate.cpp
Command agent_command();  // cmd_agent.cpp

/// --oversubscribe (and PKB_OVERSUBSCRIBE=1), declared once for run, eval, sweep and agent.
void declare_oversubscribe(CLI::App& sub, bool& flag);

/// --profile DIR, declared once for run, eval and sweep (eval/profile_out.hpp has what it writes).
void declare_profile(CLI::App& sub, std::string& dir);

/// A CLI11 check that a numeric flag is at least `lo`, run while parsing, so a bad value is a parse
/// error (exit 2) before any GPU is probed. `hint` follows the bound in the message ("must be at
/// least 1 (leave --gpus out to use every visible GPU), not 0"). A value that is not a number is
/// left to CLI11's own conversion message.
CLI::Validator at_least(double lo, std::string hint = "");

/// The hint every --gpus check gives.
inline constexpr const char* kGpusHint = " (leave --gpus out to use every visible GPU)";

/// Why `path` cannot be a solution file ("does not exist", "is a directory, not a .cu file", ...),
/// or "" when it is a regular file. Checked before anything is compiled or launched.
std::string solution_file_problem(const std::string& path);

/// Directory of the running pkb executable (where pkb-worker lives).
std::string self_dir();

/// The command line pkb was started with (set once by main, for records' provenance).
const std::vector<std::string>& invocation();
void set_invocation(int argc, char** argv);

}  // namespace pkb::cli
