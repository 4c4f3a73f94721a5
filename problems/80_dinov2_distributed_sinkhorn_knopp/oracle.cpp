// CPU oracle for problem 80: PKB's Sinkhorn-Knopp in double over all W B samples. The only fp32
// rounding kept is the exponent's, E = exp(fp32(t * fp32(1 / 0.07))), as PyTorch stores t / temp as an
// fp32 tensor before exp (a product with the fp32 reciprocal of the Python float); everything after
// that is double. Rank r's samples are global columns [r B, (r+1) B) of PKB's [K, W B] matrix Q; its
// output is their rows, out[r][b][k] = Q[k][r B + b].
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr float kTeacherTemp = 0.07f;  // PKB: teacher_temp = 0.07

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const size_t B = io.param("B"), K = io.param("K");
  const int iters = static_cast<int>(io.param("iters"));
  const double inv_temp = 1.0f / kTeacherTemp;  // the fp32 reciprocal
  double total_batch = 0.0, mass = 0.0;
  for (int r = 0; r < W; ++r) {
    total_batch += io.inputs[r][1].values[0];
    const std::vector<double>& t = io.inputs[r][0].values;
    std::vector<double>& q = io.outputs[r][0].values;
    for (size_t i = 0; i < B * K; ++i) {
      q[i] = std::exp(static_cast<double>(static_cast<float>(t[i] * inv_temp)));
      mass += q[i];
    }
  }
  for (int r = 0; r < W; ++r)
    for (double& v : io.outputs[r][0].values) v /= mass;
  std::vector<double> proto(K);
  for (int it = 0; it < iters; ++it) {
    // Each prototype k: divided by its sum over every rank's samples, then by K.
    std::fill(proto.begin(), proto.end(), 0.0);
    for (int r = 0; r < W; ++r) {
      const std::vector<double>& q = io.outputs[r][0].values;
      for (size_t b = 0; b < B; ++b)
        for (size_t k = 0; k < K; ++k) proto[k] += q[b * K + k];
    }
    // Each sample b: divided by its sum over the prototypes (local), then by the total batch.
    for (int r = 0; r < W; ++r) {
      std::vector<double>& q = io.outputs[r][0].values;
      for (size_t b = 0; b < B; ++b) {
        double* row = &q[b * K];
        double s = 0.0;
        for (size_t k = 0; k < K; ++k) {
          row[k] = row[k] / proto[k] / static_cast<double>(K);
          s += row[k];
        }
        for (size_t k = 0; k < K; ++k) row[k] = row[k] / s / total_batch;
      }
    }
  }
  for (int r = 0; r < W; ++r)
    for (double& v : io.outputs[r][0].values) v *= total_batch;
}
