// CPU oracle for problem 81: rank j's masks and scores, in rank order, are every rank's
// masks_global and scores_global (values of D, exact in double). b_i = (mask_i > 0), areas a_i and
// intersections I_ij are integer counts; pair i < j overlaps when fp32(I / fp32(max(a_i + a_j - I, 1)))
// >= fp32(0.7), as PKB computes it (every operand is an integer below 2^24, so only the quotient
// rounds; the spec explains why that decides as exact arithmetic would). Object k is suppressed when
// it overlaps some m with last[k] > last[m] > -1; its mask becomes -10 on every rank.
#include <algorithm>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t T = io.param("T"), px = static_cast<size_t>(io.param("H") * io.param("Wd"));
  std::vector<double> masks, scores;
  for (int j = 0; j < W; ++j) {
    masks.insert(masks.end(), io.inputs[j][0].values.begin(), io.inputs[j][0].values.end());
    scores.insert(scores.end(), io.inputs[j][1].values.begin(), io.inputs[j][1].values.end());
  }
  const std::vector<double>& last = io.inputs[0][2].values;  // shared: the same on every rank
  std::vector<std::vector<bool>> bin(T, std::vector<bool>(px));
  std::vector<long long> area(T, 0);
  for (size_t i = 0; i < T; ++i)
    for (size_t p = 0; p < px; ++p) {
      bin[i][p] = masks[i * px + p] > 0.0;
      area[i] += bin[i][p];
    }
  auto overlap = [&](size_t i, size_t j) {  // i < j
    long long inter = 0;
    for (size_t p = 0; p < px; ++p) inter += bin[i][p] && bin[j][p];
    const float uni = std::max(static_cast<float>(area[i] + area[j] - inter), 1.0f);
    return static_cast<float>(inter) / uni >= 0.7f;
  };
  std::vector<bool> suppress(T, false);
  for (size_t k = 0; k < T; ++k)
    for (size_t m = 0; m < T && !suppress[k]; ++m)
      if (m != k && last[k] > last[m] && last[m] > -1) suppress[k] = overlap(std::min(k, m), std::max(k, m));
  for (int r = 0; r < W; ++r) {
    auto& out = io.outputs[r];
    for (size_t i = 0; i < T; ++i) {
      for (size_t p = 0; p < px; ++p) out[0].values[i * px + p] = suppress[i] ? -10.0 : masks[i * px + p];
      out[1].values[i] = scores[i];
      out[2].values[i] = suppress[i] ? 1.0 : 0.0;
    }
  }
}
