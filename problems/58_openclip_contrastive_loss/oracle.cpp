// CPU oracle for problem 58: every rank's SigLIP loss from every rank's features, in double, with
// PyTorch's roundings to D emulated in PyTorch's order: Is = D(10 I); per text block the logits
// D(D(Is T^T) + bias), each D(logsigmoid(+-logit)), the block sum rounded to D, the term
// D(-sum * fp32(1/B)), and the loss accumulated as D(loss + term) in the exchange order (own block,
// then rank+k and rank-k for k = 1 .. floor((W-1)/2), then rank-W/2 for even W). What it cannot
// mirror is the fp32 accumulation order of the GEMM and of the sums (see spec.toml).
#include <algorithm>
#include <cmath>
#include <vector>

#include "spec/oracle.hpp"

namespace {

constexpr double kLogitScale = 10.0;  // PKB: logit_scale = 10.0

/// -D(sum of D(logsigmoid(+-D(D(Is T^T) + bias)))) rounded to D and scaled by fp32(1/B), rounded:
/// one block's term; `own` puts the + on the diagonal.
double block_term(pkb::Narrow d, const std::vector<double>& scaled, const std::vector<double>& text, size_t rows,
                  size_t dim, double bias, bool own) {
  double sum = 0.0;
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < rows; ++j) {
      double dot = 0.0;
      for (size_t k = 0; k < dim; ++k) dot += scaled[i * dim + k] * text[j * dim + k];
      double l = pkb::round_to(d, pkb::round_to(d, dot) + bias);
      double z = own && i == j ? l : -l;
      sum += pkb::round_to(d, std::min(z, 0.0) - std::log1p(std::exp(-std::abs(z))));
    }
  const double inv_rows = static_cast<float>(1.0 / static_cast<double>(rows));
  return pkb::round_to(d, -pkb::round_to(d, sum) * inv_rows);
}

}  // namespace

PKB_ORACLE(io) {
  const int W = io.world;
  const pkb::Narrow d = pkb::infer_narrow(io, io.inputs[0][0].values);
  const size_t rows = static_cast<size_t>(io.inputs[0][0].shape[0]);
  const size_t dim = static_cast<size_t>(io.inputs[0][0].shape[1]);
  const double bias = io.inputs[0][2].values[0];  // shared: the same on every rank
  for (int r = 0; r < W; ++r) {
    std::vector<double> scaled(io.inputs[r][0].values);
    for (double& v : scaled) v = pkb::round_to(d, kLogitScale * v);
    auto text = [&](int q) -> const std::vector<double>& { return io.inputs[((q % W) + W) % W][1].values; };
    double loss = block_term(d, scaled, text(r), rows, dim, bias, true);
    for (int k = 1; k <= (W - 1) / 2; ++k) {
      loss = pkb::round_to(d, loss + block_term(d, scaled, text(r + k), rows, dim, bias, false));
      loss = pkb::round_to(d, loss + block_term(d, scaled, text(r - k), rows, dim, bias, false));
    }
    if ((W - 1) % 2) loss = pkb::round_to(d, loss + block_term(d, scaled, text(r - W / 2), rows, dim, bias, false));
    io.outputs[r][0].values[0] = loss;
  }
}
