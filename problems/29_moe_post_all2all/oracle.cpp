// CPU oracle for problem 29, rounding to D where PKB's PyTorch does. Rank j: sorted_j = expert_outputs_j
// cut into chunks c = l W + i of num_global_tokens_per_local_expert_j[i][l] rows, concatenated in the
// order i L + l. Rank r receives, for j = 0 .. W-1 in order, the output_splits_j[r] rows of sorted_j
// that start after rank j's rows for ranks 0 .. r-1 (the sender's split; the split matrix makes it
// rank r's input_splits[j]). weight[t][e] = D(sum from 0 of routing_weights[t][k] with
// selected_experts[t][k] = e); tokens_weight = weight[t][e] at the true routing_map[e][t], row-major;
// out[mapping[p]] = D(out + D(received[p] x tokens_weight[p])) for p = 0 .. K M - 1, from zeros (two
// terms per token: the order of p does not change the bits).
#include <vector>

#include "spec/oracle.hpp"

PKB_ORACLE(io) {
  const int W = io.world;
  const long long E = io.param("E"), K = io.param("K"), L = io.param("L"), M = io.param("M"), N = io.param("N");
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  // Each rank's expert outputs regrouped by source rank (as it sends them).
  std::vector<std::vector<double>> sorted(W);
  for (int j = 0; j < W; ++j) {
    const std::vector<double>& y = io.inputs[j][0].values;      // [K M, N]
    const std::vector<double>& chunk = io.inputs[j][5].values;  // [W, L]
    std::vector<long long> start(W * L + 1, 0);                 // by chunk l W + i
    for (long long l = 0, c = 0; l < L; ++l)
      for (long long i = 0; i < W; ++i, ++c) start[c + 1] = start[c] + static_cast<long long>(chunk[i * L + l]);
    for (long long i = 0; i < W; ++i)
      for (long long l = 0; l < L; ++l) {
        const long long c = l * W + i;
        sorted[j].insert(sorted[j].end(), y.begin() + start[c] * N, y.begin() + start[c + 1] * N);
      }
  }
  for (int r = 0; r < W; ++r) {
    const auto& in = io.inputs[r];
    // The all-to-all back: rank j's rows for rank r, in rank order.
    std::vector<double> received;
    for (int j = 0; j < W; ++j) {
      const std::vector<double>& away = io.inputs[j][4].values;  // rank j's output_splits
      long long off = 0;
      for (int k = 0; k < r; ++k) off += static_cast<long long>(away[k]);
      const long long rows = static_cast<long long>(away[r]);
      received.insert(received.end(), sorted[j].begin() + off * N, sorted[j].begin() + (off + rows) * N);
    }
    // The dense weight table (scatter_add_ into zeros, in D).
    const std::vector<double>& w = in[1].values;    // [M, K]
    const std::vector<double>& sel = in[2].values;  // [M, K]
    std::vector<double> table(M * E, 0.0);
    for (long long t = 0; t < M; ++t)
      for (long long k = 0; k < K; ++k) {
        const long long e = static_cast<long long>(sel[t * K + k]);
        if (e >= 0 && e < E) table[t * E + e] = pkb::round_to(d, table[t * E + e] + w[t * K + k]);
      }
    // Each routed row's weight, in routing-map order.
    const std::vector<double>& routing = in[6].values;  // [E, M]
    std::vector<double> tokens_weight;
    for (long long e = 0; e < E; ++e)
      for (long long t = 0; t < M; ++t)
        if (routing[e * M + t] != 0.0) tokens_weight.push_back(table[t * E + e]);
    // Weighted rows scatter-added into zeros.
    const std::vector<double>& mapping = in[7].values;  // [K M]
    std::vector<double>& out = io.outputs[r][0].values;  // [M, N]
    const long long routed = static_cast<long long>(mapping.size());
    for (long long p = 0; p < routed && p < static_cast<long long>(tokens_weight.size()); ++p) {
      const long long t = static_cast<long long>(mapping[p]);
      if (t < 0 || t >= M) continue;
      for (long long c = 0; c < N; ++c) {
        const double term = pkb::round_to(d, received[p * N + c] * tokens_weight[p]);
        out[t * N + c] = pkb::round_to(d, out[t * N + c] + term);
      }
    }
  }
}
