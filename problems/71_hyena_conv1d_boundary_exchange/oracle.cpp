// CPU oracle for problem 71: the zigzag halo exchange and the depthwise conv1d of both chunks, in
// double. Rank r's chunk A is padded with rank r-1's A tail (zeros for r = 0), its chunk B with rank
// r+1's B tail (its own A tail for r = W-1).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const auto& xs = io.inputs[0][0].shape;  // [batch, C, 2L]
  size_t rows = static_cast<size_t>(xs[0] * xs[1]);
  size_t C = static_cast<size_t>(xs[1]);
  size_t L = static_cast<size_t>(xs[2] / 2);
  size_t K = static_cast<size_t>(io.inputs[0][1].shape[2]);
  size_t H = K - 1;
  int W = io.world;
  for (int r = 0; r < W; ++r) {
    const std::vector<double>& w = io.inputs[r][1].values;
    std::vector<double>& y = io.outputs[r][0].values;
    for (size_t row = 0; row < rows; ++row)
      for (size_t chunk = 0; chunk < 2; ++chunk) {
        // padded = [halo (H) | own chunk (L)]
        std::vector<double> padded(H + L, 0.0);
        const double* own = &io.inputs[r][0].values[row * 2 * L];
        for (size_t j = 0; j < H; ++j) {
          if (chunk == 0)
            padded[j] = r > 0 ? io.inputs[r - 1][0].values[row * 2 * L + L - H + j] : 0.0;
          else
            padded[j] = r < W - 1 ? io.inputs[r + 1][0].values[row * 2 * L + 2 * L - H + j] : own[L - H + j];
        }
        for (size_t t = 0; t < L; ++t) padded[H + t] = own[chunk * L + t];
        for (size_t t = 0; t < L; ++t) {
          double acc = 0.0;
          for (size_t j = 0; j < K; ++j) acc += w[(row % C) * K + j] * padded[t + j];
          y[row * 2 * L + chunk * L + t] = acc;
        }
      }
  }
}
