// `pkb sweep`: one problem over a range of sizes, in the manner of nccl-tests — per size the
// baseline's and the candidate's median time, algbw, busbw, % of the measured link, and the ratio.
// Each side is one job running every size (one NCCL init per side); every size is checked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/evaluator.hpp"

namespace pkb {

struct SweepOptions {
  EvalOptions eval;  // problem, solution (empty: the baseline alone), gpus, dtype, ...
  uint64_t begin_bytes = 8 << 10;
  uint64_t end_bytes = 256 << 20;
  double factor = 4;
  std::string var = "M";  // the size variable that is scaled
  std::vector<std::string> classes;  // instead of a byte range: these named size classes ("all": every one)
  bool graph = false;  // also time CUDA-graph replays
};

struct SweepRow {
  EvalRecord record;  // kind "sweep", one per size
  uint64_t target_bytes = 0, bytes = 0;  // asked for, and algbw bytes of the chosen instance
  double base_graph_us = 0, cand_graph_us = 0;
};

/// The sizes a sweep visits: begin, begin*factor, ... up to end (inclusive).
std::vector<uint64_t> sweep_sizes(uint64_t begin, uint64_t end, double factor);

/// Throws Error(invalid_argument) on bad input before anything starts.
std::vector<SweepRow> run_sweep(const SweepOptions& opts);

/// The nccl-tests-like table.
std::string format_sweep_table(const SweepOptions& opts, const std::vector<SweepRow>& rows);

/// The table's legend for %link: which rate it divides by, and whether calibrated or the datasheet's.
std::string link_legend(const nlohmann::json& roofline);

}  // namespace pkb
