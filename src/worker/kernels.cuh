// The harness's own device work: input generation, poisoning, output checks (digest, unwritten and
// non-finite counts), sampling, the pre-call barrier, and peer-pointer discovery. None of it runs
// inside a timed interval.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdint>

#include "core/dist.hpp"
#include "core/dtype.hpp"

namespace pkb::worker {

/// Result of checking one output once; zero-initialised by the caller.
struct CheckSlot {
  unsigned long long digest;
  unsigned long long unwritten;  // elements still equal to the poison pattern
  unsigned long long nonfinite;  // NaN/Inf elements (floating types)
};

/// The part of an output that is checked: all of it, or a ragged output's counted rows, with the
/// count read on the device (from the count output) when the kernel runs (core/ragged.hpp).
struct RowLimit {
  const void* count = nullptr;  // the count output; null: every element
  DType count_dtype = DType::i64;
  size_t rows = 0, row_elems = 0;
};

void launch_generate(void* data, DType dtype, size_t numel, const Dist& dist, uint64_t key, cudaStream_t s);
void launch_fill_pattern(void* data, size_t elem_size, size_t numel, uint64_t pattern, cudaStream_t s);
/// Digest, unwritten and non-finite counts of the first `numel` elements, or of the counted rows.
void launch_check(const void* data, DType dtype, size_t numel, uint64_t poison, CheckSlot* slot, cudaStream_t s,
                  RowLimit limit = {});
/// out[k] = element positions[k] of data (elem_size bytes each); zero where a position lies past
/// a ragged output's counted rows.
void launch_gather_samples(const void* data, size_t elem_size, const uint64_t* positions, int k, void* out, cudaStream_t s,
                           RowLimit limit = {});
/// An LSA barrier over every rank, then a GPU-side wait of `delay_us` (so the call that follows is
/// already queued when the GPU reaches it).
void launch_barrier_delay(const ncclDevComm& dc, double delay_us, cudaStream_t s);
/// out[r] = rank r's address of the window (nullptr for ranks outside this rank's LSA team).
void launch_peer_pointers(ncclWindow_t win, int world, int rank, int lsa_rank, int lsa_size, void** out, cudaStream_t s);
/// An empty kernel on each side of a profiled call (--profile): CUPTI's records of it give the
/// call's interval on the profile's clock. Its name, for finding it among the records:
inline constexpr const char* kProfileMarkKernel = "profile_mark_kernel";
void launch_profile_mark(cudaStream_t s);
/// A kernel that spins for `us` microseconds (used to measure event and launch overheads in tests).
void launch_spin(double us, cudaStream_t s);

}  // namespace pkb::worker
