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
  Vars vars;  // W, sizes, params (rank is not set)
  std::vector<std::vector<OracleTensor>> inputs;   // [rank][input], filled by the harness
  std::vector<std::vector<OracleTensor>> outputs;  // [rank][output], shaped and zeroed; the oracle fills values
  long long param(const std::string& name) const;
};

using OracleFn = void (*)(OracleIO&);

/// The oracle of a problem (by folder stem), or nullptr if it has none.
OracleFn find_oracle(const std::string& stem);

}  // namespace pkb

#define PKB_ORACLE(io) void PKB_ORACLE_FN(::pkb::OracleIO& io)
