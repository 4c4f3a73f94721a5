// CPU oracle for problem 28. Rank j: routing_map_j[e][t] = the sum over k of expert_mask_j[e][k][t];
// mapping_j = the t of every nonzero routing_map_j[e][t], e-major then t ascending; permuted_j[p] =
// hidden_states_j[mapping_j[p]]. Rank r receives, for j = 0 .. W-1 in order, the input_splits_j[r]
// rows of permuted_j that start after rank j's rows for ranks 0 .. r-1 (the sender's split, as
// the exchange moves them; the split matrix makes it rank r's output_splits[j]). Those received rows
// are cut into chunks of num_global_tokens_per_local_expert_r.ravel() rows (chunk i L + l), and
// chunk i L + l is placed at position l W + i. Copies and sums of 0/1: exact in double.
#include <algorithm>
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long E = io.param("E"), K = io.param("K"), L = io.param("L"), M = io.param("M"), N = io.param("N");
  // Per rank: the routing map (an output), the mapping (an output) and the permuted rows.
  std::vector<std::vector<double>> permuted(W);
  for (int j = 0; j < W; ++j) {
    const std::vector<double>& x = io.inputs[j][0].values;     // [M, N]
    const std::vector<double>& mask = io.inputs[j][1].values;  // [E, K, M]
    std::vector<double>& routing = io.outputs[j][1].values;    // [E, M]
    std::vector<double>& mapping = io.outputs[j][2].values;    // [K M]
    long long p = 0;
    for (long long e = 0; e < E; ++e)
      for (long long t = 0; t < M; ++t) {
        double s = 0.0;
        for (long long k = 0; k < K; ++k) s += mask[(e * K + k) * M + t];
        routing[e * M + t] = s;
        if (s != 0.0 && p < static_cast<long long>(mapping.size())) {
          mapping[p++] = static_cast<double>(t);
          permuted[j].insert(permuted[j].end(), x.begin() + t * N, x.begin() + (t + 1) * N);
        }
      }
  }
  for (int r = 0; r < W; ++r) {
    // The all-to-all: rank j's rows for rank r, in rank order.
    std::vector<double> received;
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& send = io.inputs[j][2].values;  // rank j's input_splits
      long long off = 0;
      for (int k = 0; k < r; ++k) off += static_cast<long long>(send[k]);
      const long long count = static_cast<long long>(send[r]);
      received.insert(received.end(), permuted[j].begin() + off * N, permuted[j].begin() + (off + count) * N);
    }
    // The chunk reorder.
    const std::vector<double>& chunk = io.inputs[r][4].values;  // [W, L]
    std::vector<long long> start(W * L + 1, 0);
    for (long long c = 0; c < W * L; ++c) start[c + 1] = start[c] + static_cast<long long>(chunk[c]);
    std::vector<double>& out = io.outputs[r][0].values;  // [K M, N]
    long long row = 0;
    for (long long l = 0; l < L; ++l)
      for (long long i = 0; i < W; ++i) {
        const long long c = i * L + l, rows = start[c + 1] - start[c];
        std::copy_n(received.begin() + start[c] * N, rows * N, out.begin() + row * N);
        row += rows;
      }
  }
}
