// Interleaved A/B timing: the baseline's and the candidate's jobs are alive at once and take turns
// on the GPUs in rounds of R timed calls (ABAB...), so that both see the same machine (clocks,
// temperature, neighbours) within seconds of each other. Workers need nothing new for it: a worker
// runs a timed call only when the driver's answer to its previous commit arrives, so the driver
// orders the two jobs by holding answers back (docs/evaluation.md, "Interleaved timing").
#pragma once
#include <mutex>
#include <vector>

namespace pkb {

/// The turn-taking of two jobs (0: the baseline, which goes first; 1: the candidate), shared by their
/// runners (each in its own thread). Per step: no timed call starts before both jobs have finished
/// their warm-up; job 0 runs round k, then job 1 runs round k, then job 0 round k + 1, ...; and the
/// answer to a job's last call (after which its workers go on to tear down) waits until the other
/// job has run all its calls. A job that ends or fails leaves; the other then runs unhindered.
class CallGate {
 public:
  /// `world` ranks per job, rounds of `round` calls (>= 1).
  CallGate(int world, int round);

  /// Rank `rank` of `job` committed `call` of `step` (call -1: ready, warm-up done).
  void committed(int job, int step, int rank, int call);

  /// May `job` answer a rank's commit of `call` now? The answer authorises call + 1 (of `iters`).
  bool may_answer(int job, int step, int call, int iters) const;

  /// `job` has ended (finished or failed): nothing waits for it any more.
  void leave(int job);

 private:
  struct Side {
    std::vector<std::vector<int>> commits;  // [step][call + 1]: ranks that committed it
    bool left = false;
  };
  int count(const Side& s, int step, int call) const;  // ranks that committed `call` of `step`
  bool all(const Side& s, int step, int call) const { return s.left || count(s, step, call) >= world_; }

  mutable std::mutex m_;
  int world_, round_;
  Side sides_[2];
};

/// Speedup from interleaved rounds: per round the ratio of the medians (baseline / candidate) of
/// its calls, the median of those ratios, and a distribution-free 95 % interval for that median
/// from the ratios' order statistics (needs at least 6 rounds; with fewer, lo and hi are 0).
struct RoundSpeedup {
  double median = 0;
  double lo = 0, hi = 0;
  int rounds = 0;
};
RoundSpeedup round_speedup(const std::vector<double>& base_us, const std::vector<double>& cand_us, int round);

}  // namespace pkb
