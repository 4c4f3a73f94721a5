// CPU oracle for problem 74 (Kimi Delta Attention, CP x TP). For each TP index p (one CP group, a
// "chain": the ranks p, p + TP, p + 2 TP, ... in sequence order), the gates, the normalisation and
// the delta-rule recurrence over the chain's T = CP L tokens are computed in double; the output is
// rounded to D as PKB's output.to(out_dtype), the TP all-reduce adds the two chains' rounded
// outputs in fp32 and rounds to D (NCCL's sum of two D values), and rank p + c TP gets rows
// [c L, (c + 1) L). D is inferred from q (pkb::infer_narrow).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kLowerBound = -5.0;  // PKB: lower_bound = -5.0
constexpr double kNormEps = 1e-12;    // F.normalize
enum { kQ, kK, kV, kG, kBeta, kALog, kDtBias };

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Shape {
  long long L, H, K, V, CP, TP;
};

// The unrounded recurrence output [T, H, V] of the chain of TP index p.
std::vector<double> chain_output(const pkb::OracleIO& io, const Shape& s, int p) {
  const long long T = s.CP * s.L;
  const std::vector<double>& a_log = io.inputs[p][kALog].values;
  const std::vector<double>& dt_bias = io.inputs[p][kDtBias].values;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.K));
  std::vector<double> out(static_cast<size_t>(T * s.H * s.V), 0.0);
  std::vector<double> S(static_cast<size_t>(s.K * s.V)), q(s.K), k(s.K), decay(s.K), projected(s.V), update(s.V);
  for (long long h = 0; h < s.H; ++h) {
    std::fill(S.begin(), S.end(), 0.0);
    const double a_scale = std::exp(a_log[h]);
    for (long long t = 0; t < T; ++t) {
      const auto& in = io.inputs[p + (t / s.L) * s.TP];  // the rank that holds token t
      const long long lt = t % s.L;
      const double* qt = &in[kQ].values[(lt * s.H + h) * s.K];
      const double* kt = &in[kK].values[(lt * s.H + h) * s.K];
      const double* gt = &in[kG].values[(lt * s.H + h) * s.K];
      const double* vt = &in[kV].values[(lt * s.H + h) * s.V];
      const double b = sigmoid(in[kBeta].values[lt * s.H + h]);
      double nq = 0.0, nk = 0.0;
      for (long long i = 0; i < s.K; ++i) {
        nq += qt[i] * qt[i];
        nk += kt[i] * kt[i];
      }
      nq = std::max(std::sqrt(nq), kNormEps);
      nk = std::max(std::sqrt(nk), kNormEps);
      for (long long i = 0; i < s.K; ++i) {
        q[i] = qt[i] / nq * scale;
        k[i] = kt[i] / nk;
        decay[i] = std::exp(kLowerBound * sigmoid(a_scale * (gt[i] + dt_bias[h * s.K + i])));
      }
      // Row by row of S (cache-friendly); the column sums are the same dot products as PKB's bmm.
      std::fill(projected.begin(), projected.end(), 0.0);
      for (long long i = 0; i < s.K; ++i) {
        double* s_row = &S[i * s.V];
        for (long long j = 0; j < s.V; ++j) {
          s_row[j] *= decay[i];                // decay[:, None] * state
          projected[j] += k[i] * s_row[j];     // k^T state
        }
      }
      for (long long j = 0; j < s.V; ++j) update[j] = (vt[j] - projected[j]) * b;
      double* o = &out[(t * s.H + h) * s.V];   // zero-initialised
      for (long long i = 0; i < s.K; ++i) {
        double* s_row = &S[i * s.V];
        for (long long j = 0; j < s.V; ++j) {
          s_row[j] += k[i] * update[j];        // state + k update^T
          o[j] += q[i] * s_row[j];             // q^T state
        }
      }
    }
  }
  return out;
}

}  // namespace

PKB_ORACLE(io) {
  const Shape s{io.param("L"), io.param("H"), io.param("K"), io.param("V"), io.param("CP"), io.param("TP")};
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][kQ].values);
  std::vector<std::vector<double>> chains;
  for (int p = 0; p < s.TP; ++p) {
    chains.push_back(chain_output(io, s, p));
    for (double& x : chains.back()) x = pkb::round_to(d, x);  // output.to(out_dtype)
  }
  if (s.TP == 2)  // all_reduce(SUM) over the TP pair, in D
    for (size_t i = 0; i < chains[0].size(); ++i) chains[0][i] = pkb::round_to(d, chains[0][i] + chains[1][i]);
  const size_t slice = static_cast<size_t>(s.L * s.H * s.V);
  for (int r = 0; r < io.world; ++r) {
    const long long c = r / s.TP;
    const double* src = &chains[0][c * slice];
    std::copy(src, src + slice, io.outputs[r][0].values.begin());
  }
}
