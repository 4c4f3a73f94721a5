// CPU oracles: each problem folder may hold an oracle.cpp that computes every rank's outputs from
// every rank's inputs in double precision. The build links them into pkb through a generated index
// (problems/CMakeLists.txt), so the harness still never names a problem.
//
// An oracle file looks like:
//
//   #include "spec/oracle.hpp"
//   PKB_ORACLE(io) {
//     for (int r = 0; r < io.world; ++r) ...   // io.inputs[r][i].values -> io.outputs[r][o].values
//   }
#pragma once
#include <string>
#include <vector>

#include "core/numeric.hpp"
#include "spec/expr.hpp"

namespace pkb {

struct OracleTensor {
  std::string name;
  std::vector<long long> shape;
  std::vector<double> values;
  size_t numel() const { return values.size(); }
};

struct OracleIO {
  int world = 0;
  Vars vars;  // W, sizes, params, float params, this trial's per-call params (rank is not set)
  std::vector<std::vector<OracleTensor>> inputs;  // [rank][input], filled by the harness
  std::vector<std::vector<OracleTensor>> outputs;  // [rank][output], shaped and zeroed; the oracle fills values
  long long param(const std::string& name) const;  // an integer parameter (or this trial's per-call one)
  double fparam(const std::string& name) const;  // a real-valued parameter (lr = 1e-3), or any as a double
};

using OracleFn = void (*)(OracleIO&);

/// The element type D whose roundings an oracle emulates. Oracles are not told D: e = 4 is fp32; for
/// e = 2 it is bf16 when every value of `drawn` (a tensor drawn in D) is a bf16 value — random fp16
/// values essentially never all are — else fp16.
enum class Narrow { fp32, bf16, fp16 };

inline Narrow infer_narrow(const OracleIO& io, const std::vector<double>& drawn) {
  if (io.param("e") == 4) return Narrow::fp32;
  for (double v : drawn) {
    float f = static_cast<float>(v);
    if (num::bf16_to_float(num::float_to_bf16(f)) != f) return Narrow::fp16;
  }
  return Narrow::bf16;
}

/// `v` cast to fp32 and then to D, as PyTorch casts an fp32 result to the tensor's dtype.
inline double round_to(Narrow d, double v) {
  float f = static_cast<float>(v);
  switch (d) {
    case Narrow::bf16: return num::bf16_to_float(num::float_to_bf16(f));
    case Narrow::fp16: return num::fp16_to_float(num::float_to_fp16(f));
    default: return f;
  }
}

/// The oracle of a problem (by folder stem), or nullptr if it has none.
OracleFn find_oracle(const std::string& stem);

}  // namespace pkb

#define PKB_ORACLE(io) void PKB_ORACLE_FN(::pkb::OracleIO& io)
