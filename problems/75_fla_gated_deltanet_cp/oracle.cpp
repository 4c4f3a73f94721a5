// CPU oracle for problem 75 (Gated DeltaNet, Ulysses CP). For every head n of the HN (owned by rank
// n / HL, whose a_log and dt_bias hold it at n % HL), the decay, the normalisation and the gated
// delta-rule recurrence over the whole sequence (token t held by rank t / L at t % L) are computed in
// double; o_t is rounded to D as PKB's output.to(out_dtype) and lands at rank t / L, row t % L,
// head n. D is inferred from q (pkb::infer_narrow).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kNormEps = 1e-6;             // PKB: F.normalize(..., eps=1e-6)
constexpr double kSoftplusThreshold = 20.0;  // F.softplus default
enum { kQ, kK, kV, kGate, kBeta, kALog, kDtBias };

double softplus(double x) { return x > kSoftplusThreshold ? x : std::log1p(std::exp(x)); }

}  // namespace

PKB_ORACLE(io) {
  const long long L = io.param("L"), HN = io.param("HN"), HL = io.param("HL"), K = io.param("K"), V = io.param("V");
  const long long T = io.world * L;
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][kQ].values);
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));
  std::vector<double> S(static_cast<size_t>(K * V)), q(K), k(K), projected(V), update(V), acc(V);
  for (long long n = 0; n < HN; ++n) {
    const auto& owner = io.inputs[n / HL];
    const double a_scale = std::exp(owner[kALog].values[n % HL]);
    const double dt_bias = owner[kDtBias].values[n % HL];
    std::fill(S.begin(), S.end(), 0.0);
    for (long long t = 0; t < T; ++t) {
      const int r = static_cast<int>(t / L);  // the rank that holds token t
      const auto& in = io.inputs[r];
      const long long row = (t % L) * HN + n;  // [token, head] in the rank's tensors
      const double* qt = &in[kQ].values[row * K];
      const double* kt = &in[kK].values[row * K];
      const double* vt = &in[kV].values[row * V];
      const double decay = std::exp(-a_scale * softplus(in[kGate].values[row] + dt_bias));
      const double beta = in[kBeta].values[row];
      double nq = 0.0, nk = 0.0;
      for (long long i = 0; i < K; ++i) {
        nq += qt[i] * qt[i];
        nk += kt[i] * kt[i];
      }
      nq = std::max(std::sqrt(nq), kNormEps);
      nk = std::max(std::sqrt(nk), kNormEps);
      for (long long i = 0; i < K; ++i) {
        q[i] = qt[i] / nq * scale;
        k[i] = kt[i] / nk;
      }
      // Row by row of S (cache-friendly); the column sums are the same dot products as PKB's bmm.
      std::fill(projected.begin(), projected.end(), 0.0);
      for (long long i = 0; i < K; ++i) {
        double* s_row = &S[i * V];
        for (long long j = 0; j < V; ++j) {
          s_row[j] *= decay;                   // state * decay
          projected[j] += k[i] * s_row[j];     // k^T state
        }
      }
      for (long long j = 0; j < V; ++j) update[j] = (vt[j] - projected[j]) * beta;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (long long i = 0; i < K; ++i) {
        double* s_row = &S[i * V];
        for (long long j = 0; j < V; ++j) {
          s_row[j] += k[i] * update[j];        // state + k update^T
          acc[j] += q[i] * s_row[j];           // q^T state
        }
      }
      double* o = &io.outputs[r][0].values[row * V];
      for (long long j = 0; j < V; ++j) o[j] = pkb::round_to(d, acc[j]);  // output.to(out_dtype)
    }
  }
}
