// The verdict of one evaluation. Every outcome, including every failure, is one of these.
#pragma once
#include <optional>
#include <string_view>

namespace pkb {

enum class Status {
  ok,  // every check passed
  compile_error,  // nvcc rejected the source (or ran past its deadline)
  load_error,  // the shared object could not be loaded, or lacks an entry point
  runtime_error,  // a CUDA/NCCL/cuBLAS error or a non-zero return from an entry point
  mismatch,  // an output differs from the baseline (or is unwritten, non-finite, mis-shaped)
  crash,  // a worker died (signal or unexpected exit)
  timeout,  // a phase (or the whole job) ran past its deadline
  protocol_error,  // a worker hosting the candidate sent a malformed, unexpected or out-of-order frame
  harness_error,  // pkb itself failed; never charged to the candidate
  flagged,  // passed, but a measurement is implausible (e.g. faster than the roofline floor)
  unsupported,  // the solution asked for what this run cannot give (symmetric memory with
                // --oversubscribe); neither a pass nor a failure, never an attempt in pass@k
};

std::string_view to_string(Status s);
std::optional<Status> parse_status(std::string_view s);

/// True for statuses that count as a correct solution.
inline bool is_pass(Status s) { return s == Status::ok; }

/// True for statuses that are not charged to the candidate: not attempts in pass@k, retried on resume.
inline bool is_not_attempt(Status s) { return s == Status::harness_error || s == Status::unsupported; }

}  // namespace pkb
