// CPU oracle for problem 63 (one distributed LKF step). The problem is fp64 throughout, so double is
// the computation itself: the elementwise steps follow PKB's operation order (the same roundings),
// and only the dot products may add in another order than the GPU's (see the spec's tolerance).
#include <cstddef>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kNu = 0.9987;  // PKB: kalman_nue default

/// K = P H for one block (P row-major [b, b]).
void mat_vec(const double* p, const double* h, long long b, double* k) {
  for (long long j = 0; j < b; ++j) {
    double d = 0.0;
    for (long long c = 0; c < b; ++c) d += p[j * b + c] * h[c];
    k[j] = d;
  }
}

/// H^T P H for one block, as PKB's (H^T P) H.
double quad_form(const double* p, const double* h, long long b) {
  std::vector<double> v(static_cast<size_t>(b), 0.0);
  for (long long j = 0; j < b; ++j)
    for (long long c = 0; c < b; ++c) v[c] += h[j] * p[j * b + c];
  double d = 0.0;
  for (long long c = 0; c < b; ++c) d += v[c] * h[c];
  return d;
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const long long nb = io.param("NB"), b = io.param("B"), n = nb * b;
  enum { kH, kError, kWeights, kP, kLambda };

  // tmp: each rank's running sum over its blocks, then the all-reduce over the ranks.
  double tmp = 0.0;
  for (int r = 0; r < W; ++r) {
    const auto& in = io.inputs[r];
    const double lam = in[kLambda].values[0];
    double local = 0.0;
    for (long long i = 0; i < nb; ++i)
      local = local + (lam + quad_form(&in[kP].values[i * b * b], &in[kH].values[i * b], b));
    tmp += local;
  }
  const double a = 1.0 / tmp;

  std::vector<double> gathered(static_cast<size_t>(W * n));
  std::vector<double> k(static_cast<size_t>(b));
  for (int r = 0; r < W; ++r) {
    const auto& in = io.inputs[r];
    const double lam = in[kLambda].values[0], inv_lam = 1.0 / lam, err = in[kError].values[0];
    auto& p_next = io.outputs[r][1].values;
    for (long long i = 0; i < nb; ++i) {
      const double* p = &in[kP].values[i * b * b];
      mat_vec(p, &in[kH].values[i * b], b, k.data());
      for (long long j = 0; j < b; ++j) gathered[r * n + i * b + j] = in[kWeights].values[i * b + j] + (a * err) * k[j];
      for (long long j = 0; j < b; ++j)
        for (long long c = 0; c < b; ++c)
          p_next[(i * b + j) * b + c] = inv_lam * (p[j * b + c] - a * (k[j] * k[c]));
    }
    io.outputs[r][2].values[0] = (kNu * lam + 1.0) - kNu;
  }
  for (int r = 0; r < W; ++r) io.outputs[r][0].values = gathered;
}
