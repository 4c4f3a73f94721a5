// The verdict of one evaluation. Every outcome, including every failure, is one of these.
#pragma once
#include <optional>
#include <string_view>

namespace pkb {

enum class Status {
  ok,             // every check passed
  compile_error,  // nvcc rejected the source (or ran past its deadline)
  load_error,     // the shared object could not be loaded, or lacks an entry point
  runtime_error,  // a CUDA/NCCL/cuBLAS error or a non-zero return from an entry point
  mismatch,       // an output differs from the baseline (or is unwritten, non-finite, mis-shaped)
  crash,          // a worker died (signal or unexpected exit)
  timeout,        // a phase ran past its deadline
  harness_error,  // pkb itself failed; never charged to the candidate
  flagged,        // passed, but a measurement is implausible (e.g. faster than the roofline floor)
};

std::string_view to_string(Status s);
std::optional<Status> parse_status(std::string_view s);

/// True for statuses that count as a correct solution.
inline bool is_pass(Status s) { return s == Status::ok; }

}  // namespace pkb
