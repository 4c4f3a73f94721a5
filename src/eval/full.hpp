// `pkb eval --full`: one solution on every (world size, dtype, size class) cell its problem's spec
// allows, each cell one ordinary `pkb eval`, then one verdict over them all.
//
//   1. check    --worlds and the flags against the spec, before any GPU is looked for (bad input)
//   2. plan     worlds x the spec's dtypes x its size classes, each cell resolved on the CPU: a world
//               outside the spec's range, a constraint (M % W == 0) or, for the default worlds, too
//               few GPUs without --oversubscribe refuses a cell, which is listed with the reason
//   3. run      the summary's cell first (the one a plain `pkb eval` would run), then the rest in
//               order, each appended as a record of kind "full_part" as soon as it exists; a
//               solution that does not build fails the same way everywhere, so after a
//               compile_error or load_error the remaining cells are skipped
//   4. summary  one record of kind "eval" at the summary's cell: that cell's measurements, the
//               verdict over every cell and a `full` array of the cells' sub-verdicts
//
// One cell is evaluated through a function, so the loop, the verdict and the records are tested
// without GPUs (eval/full_test.cpp).
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "eval/evaluator.hpp"
#include "report/record.hpp"
#include "spec/spec.hpp"

namespace pkb {

/// The world sizes --full runs without --worlds (where the spec and the machine allow them).
inline constexpr int kFullDefaultWorlds[] = {2, 4, 8};

struct FullOptions {
  /// What every cell's eval takes (problem, solution, trials, timing, --json, --dump, ...). `gpus`
  /// is the summary's world size (0: the plain eval's, every visible GPU); `dtype` the summary's
  /// dtype; `size` and `size_overrides` must be empty (every size class is run).
  EvalOptions eval;
  std::vector<int> worlds;  // --worlds; empty: kFullDefaultWorlds
};

/// "2,4,8" -> {2, 4, 8}. Throws Error(invalid_argument) for an empty or malformed list, a world
/// size listed twice or one below 2.
std::vector<int> parse_worlds(const std::string& text);

/// Bad input that needs only the spec: a size class or size override, a --worlds size below 2 or
/// outside the spec's range, a --gpus that is not among the world sizes run.
/// Throws Error(invalid_argument).
void check_full_request(const Spec& spec, const FullOptions& o);

struct FullPlan {
  std::vector<FullCell> cells;  // worlds x dtypes x sizes in that order; refused ones with their reason
  size_t summary_cell = 0;  // the cell the summary record is at
  std::vector<size_t> run_order;  // the cells to run: summary_cell first, then the rest in order
};

/// The cells of `spec` on a machine with `visible` GPUs. Worlds from --worlds must fit the machine
/// (W above `visible` without --oversubscribe is Error(invalid_argument), as for plain eval); the
/// default ones that do not are refused. The summary's cell is the plain eval's (W = o.eval.gpus,
/// else every visible GPU, raised to the spec's minimum with --oversubscribe; o.eval.dtype; the
/// spec's default size) where it can run, else the runnable cell of that dtype and size with the
/// largest world below it, else the smallest above it, else the first runnable cell.
/// Throws Error(invalid_argument) when no cell can run.
FullPlan plan_full(const Spec& spec, const FullOptions& o, int visible);

struct FullVerdict {
  Status status = Status::ok;
  std::string message;
  std::optional<size_t> deciding;  // the cell whose status the verdict took (none when ok)
};

/// The verdict over the cells: ok only if every cell that ran is ok. Otherwise the first cell (in
/// `cells` order) that failed through the solution (any status but ok, harness_error and
/// unsupported) decides, and the message names it; where no cell did, the first harness_error or
/// unsupported cell decides, so the summary is not ok and, like that cell, not charged to the
/// solution (is_not_attempt). Refused and skipped cells are counted in the message, never decide.
FullVerdict full_verdict(const std::vector<FullCell>& cells);

/// The summary record: `at` (the summary cell's own record) as kind "eval" with the verdict's
/// status and message, every cell in `full`, and, where another cell decided, that cell's failure
/// details (rank, phase, worker and compiler output) in place of its own.
EvalRecord full_summary(EvalRecord at, const std::vector<FullCell>& cells, const FullVerdict& verdict,
                        const EvalRecord* deciding);

/// The options one cell's eval runs with: W, dtype and size of the cell, no --json (the loop
/// appends the record itself, as kind "full_part"), --dump DIR as DIR/W<w>_<dtype>_<size>.
EvalOptions cell_options(const EvalOptions& base, const FullCell& cell);

/// What the plan will do, before anything runs: one line, and one per refusal (a world refused
/// for one reason at every dtype and size is one line).
std::string format_full_plan(const Spec& spec, const FullPlan& plan, const FullOptions& o);

/// One progress line for a cell once it is done ("[ 3/32] W=4 fp16 small  ok  1.021x  12.3 s").
std::string format_cell_line(size_t index, size_t total, const FullCell& cell, const EvalRecord* record);

/// Evaluates one cell: run_eval on the GPUs, a fake in tests. May throw (Interrupted on Ctrl-C);
/// the records already appended stay.
using CellEvaluator = std::function<EvalRecord(const EvalOptions&)>;

/// Runs the plan's cells through `evaluate`, appending each record (kind "full_part") and then the
/// summary to o.eval.json_out when set, with a line per cell on `out`. Returns the summary.
EvalRecord run_full_plan(const FullOptions& o, const Spec& spec, FullPlan plan, const CellEvaluator& evaluate, std::ostream& out);

/// The whole of `pkb eval --full`: loads the spec, checks the request (before any GPU is probed),
/// probes the GPUs, plans and runs every cell with run_eval.
EvalRecord run_full(const FullOptions& o, std::ostream& out);

}  // namespace pkb
