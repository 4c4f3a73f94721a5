// `pkb eval --solutions DIR`: the batch flags of `pkb eval` and the glue between the batch loop
// (batch/batch.hpp) and the real evaluator (run_eval).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "eval/evaluator.hpp"

namespace pkb::cli {

struct BatchFlags {
  std::string solutions;  // DIR; batch mode when set
  std::string problems;  // "1,2,7" or "all"
  std::string label;  // default: DIR's name
  std::string shard;  // "i/n": this shard of the jobs only
};

/// Declares --solutions, --problems and --label on `pkb eval`.
void declare_batch_flags(CLI::App& sub, BatchFlags& f);

/// Runs the batch with every other eval flag taken from `base`; returns the exit code (0 all
/// recorded, 3 some could not run or hit a harness error, 130 interrupted). Throws
/// Error(invalid_argument) for bad input before anything runs.
int run_eval_batch(const EvalOptions& base, const BatchFlags& f);

}  // namespace pkb::cli
