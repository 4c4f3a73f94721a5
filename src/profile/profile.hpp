// Profiles of a job's calls: what every rank's GPU did (kernels, copies, NCCL), as a Chrome-trace /
// Perfetto timeline and as a short text summary (time share per kernel, copy/compute overlap, time
// in collectives and barriers, achieved bandwidth). The activity comes from each rank's profiled
// calls, after the timed phase (issue 23: CUPTI's activity API in the worker; not collected yet).
// This part only reads activity and writes the trace and the summary, so it is tested on the CPU.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkb::profile {

/// One interval of GPU work on one rank, times in nanoseconds on the host's clock.
struct Activity {
  enum class Kind { kernel, memcpy, memset };
  Kind kind = Kind::kernel;
  std::string name;  // kernel name, or the copy's kind ("DtoD", "HtoD", "DtoH", "PtoP")
  uint32_t stream = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t bytes = 0;  // copies and memsets
};

/// One profiled call on one rank: when pkb_run's work began and ended on the GPU.
struct Call {
  uint64_t start_ns = 0, end_ns = 0;
};

struct RankProfile {
  int rank = 0;
  std::vector<Activity> activity;
  std::vector<Call> calls;  // in order; call i of every rank is the same call
  uint64_t dropped = 0;  // records the rank left out past its limit (the figures then undercount)
};

/// One side of an eval (baseline or candidate), or the one job of a `pkb run`.
struct SideProfile {
  std::string label;
  std::vector<RankProfile> ranks;
  /// Bytes one call moves, as the spec counts them ([roofline]), when it does.
  std::optional<double> algbw_bytes, hbm_bytes;
};

/// Communication: NCCL's kernels and copies between GPUs; everything else a kernel runs is compute.
bool is_communication(const Activity& a);
/// pkb's own barrier and delay kernels around each call.
bool is_harness(const Activity& a);

struct KernelShare {
  std::string name;
  int count = 0;
  double total_ms = 0, share = 0;  // share of the summed activity time of all ranks during calls
};

struct RankSummary {
  int rank = 0;
  double call_ms = 0;  // all profiled calls together
  double busy = 0;  // fraction of call time with any GPU activity
  double communication_ms = 0;  // time with a communication interval running
  double overlap = 0;  // fraction of communication time with compute running beside it
  double harness_ms = 0;  // pkb's barrier inside calls (should be 0: it runs before them)
};

struct Summary {
  std::string label;
  int calls = 0;
  double median_call_ms = 0;  // per call the slowest rank, as pkb eval counts calls
  std::vector<KernelShare> kernels;  // most time first
  std::vector<RankSummary> ranks;
  std::optional<double> link_gbps, hbm_gbps;  // counted bytes / median call
  uint64_t dropped = 0;  // all ranks' dropped records
};

/// The intervals of `calls` calls, each between two kernels named `mark` (a name part) on its rank:
/// from the end of the one before the call to the start of the one after it, in time order. Throws
/// Error(invalid_argument) saying how many marks there were when there are not 2 * `calls`.
std::vector<Call> calls_between_marks(const std::vector<Activity>& activity, int calls, std::string_view mark);

/// Reads one side's activity; throws Error(invalid_argument) naming what is malformed.
SideProfile side_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SideProfile& side);
/// One rank's part of the above: {"rank", "activity": [...], "calls": [...]} (what a worker reports).
RankProfile rank_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RankProfile& rank);

Summary summarize(const SideProfile& side);
/// The summary in at most `max_kernels` kernel lines and a few more (for people and for prompts).
std::string summary_text(const Summary& s, int max_kernels = 8);

/// Chrome trace event format (it opens in https://ui.perfetto.dev and chrome://tracing): every rank
/// of every side a process ("candidate rank 1"), every stream a thread, the calls on a track of
/// their own. Each side's times start at its first call, so that sides profiled one after the other
/// lie over each other.
nlohmann::json chrome_trace(const std::vector<SideProfile>& sides);

}  // namespace pkb::profile
