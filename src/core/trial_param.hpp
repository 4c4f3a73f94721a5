// Per-call integer parameters (spec `step = { trial_low = 1, trial_high = 7 }`): a value in
// [low, high] drawn afresh for every correctness trial, warm-up input set and timed call, from the
// seed of that call alone. The worker derives it from the seed it already holds for the call (the
// one its inputs come from), the driver from the same seed for the oracle, so both see one value
// and the worker learns a timed call's value no earlier than its inputs (docs/evaluation.md,
// threat model).
#pragma once
#include <cstdint>
#include <string>

#include "core/philox.hpp"

namespace pkb {

/// One per-call parameter with its bounds resolved for an instance.
struct TrialParam {
  std::string name;
  long long low = 0, high = 0;  // inclusive
};

/// The key's rank slot for parameter draws: no rank, kSharedRank or shared_by group meets it.
inline constexpr uint64_t kTrialParamRank = 0xFFFFFFFEull;

/// The value of per-call parameter `index` (its position among the spec's per-call parameters) for
/// the call whose inputs are keyed by (call_seed, stream): see input_key in core/dist.hpp.
inline long long trial_param_value(uint64_t call_seed, uint64_t stream, uint64_t index, const TrialParam& p) {
  if (p.high <= p.low) return p.low;
  rng::U32x4 r = rng::element_bits(rng::tensor_key(call_seed, stream, kTrialParamRank, index), 0);
  uint64_t bits = (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
  uint64_t range = static_cast<uint64_t>(p.high - p.low) + 1;
  return p.low + static_cast<long long>(bits % range);
}

}  // namespace pkb
