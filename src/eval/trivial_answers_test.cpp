// No problem admits a trivial answer: for every problem with a CPU oracle, at its smallest size class
// and W = 2 and 4, on the inputs of an eval's first trials drawn as the workers draw them, a
// solution that returns zeros, ones, or its own inputs passed through (where an input has the
// output's size) must fail the problem's tolerance against the oracle on some trial, rank and
// output. (One trial alone may allow it: a random split matrix can keep every row at home.) This guards the input design (grids, scales,
// tolerances) of every spec: a port whose outputs sit below atol, or whose answer does not depend on
// the data, fails here on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "eval/compare.hpp"
#include "eval/internal.hpp"
#include "spec/oracle.hpp"
#include "spec/registry.hpp"
#include "spec/spec.hpp"

namespace pkb {
namespace {


/// Inputs of one trial as the workers draw them, and the oracle's outputs.
OracleIO oracle_io(const Instance& inst, OracleFn fn, uint64_t seed, uint64_t trial) {
  OracleIO io;
  io.world = inst.world;
  io.vars = inst.vars;
  for (size_t r = 0; r < inst.ranks.size(); ++r) {
    std::vector<OracleTensor> ins, outs;
    for (size_t i = 0; i < inst.ranks[r].inputs.size(); ++i) {
      const TensorPlan& tp = inst.ranks[r].inputs[i];
      std::string host = detail::generate_input(tp, seed, trial, static_cast<int>(r), i);
      OracleTensor t{tp.name, tp.shape, std::vector<double>(tp.numel())};
      for (size_t e = 0; e < tp.numel(); ++e) t.values[e] = load_as_double(host.data(), tp.dtype, e);
      ins.push_back(std::move(t));
    }
    for (auto& tp : inst.ranks[r].outputs) outs.push_back({tp.name, tp.shape, std::vector<double>(tp.numel(), 0.0)});
    io.inputs.push_back(std::move(ins));
    io.outputs.push_back(std::move(outs));
  }
  fn(io);
  return io;
}

/// Whether `got` passes against `want` under the output's comparison (every element).
bool passes(const std::vector<double>& got, const std::vector<double>& want, const Comparison& c) {
  for (size_t e = 0; e < want.size(); ++e)
    if (!element_ok(got[e], want[e], c)) return false;
  return true;
}

/// Whether the trivial solution `answer(rank, output)` passes every rank's every output.
template <typename Answer>
bool trivial_passes(const Instance& inst, const OracleIO& io, Answer answer) {
  for (size_t r = 0; r < io.outputs.size(); ++r)
    for (size_t o = 0; o < io.outputs[r].size(); ++o)
      if (!passes(answer(r, o), io.outputs[r][o].values, inst.ranks[r].outputs[o].compare)) return false;
  return true;
}

TEST(TrivialAnswers, FailEveryProblemWithAnOracle) {
  int checked = 0;
  for (auto& entry : discover_problems(problems_dir())) {
    Spec spec = load_spec(entry.dir);
    OracleFn fn = find_oracle(spec.stem);
    if (!fn) continue;
    DType d = spec.dtypes.empty() ? DType::bf16 : spec.dtypes.front();
    for (int world : {2, 4}) {
      Instance inst;
      try {
        inst = resolve(spec, world, {spec.sizes.front().name, {}}, d);
      } catch (const Error&) {
        continue;  // the smallest class or this W is not allowed
      }
      inst.spec = &spec;
      std::vector<OracleIO> trials;
      for (uint64_t t = 0; t < 3; ++t) trials.push_back(oracle_io(inst, fn, 0x5eed0000ull + static_cast<uint64_t>(spec.id), t));
      auto in_every_trial = [&](auto answer_for) {
        for (auto& io : trials)
          if (!trivial_passes(inst, io, answer_for(io))) return false;
        return true;
      };
      std::string where = spec.stem + " W=" + std::to_string(world) + " " + inst.size_name;
      for (double c : {0.0, 1.0})
        EXPECT_FALSE(in_every_trial([&](const OracleIO& io) {
          return [&io, c](size_t r, size_t o) { return std::vector<double>(io.outputs[r][o].numel(), c); };
        })) << where << ": the constant " << c << " passes three trials";
      EXPECT_FALSE(in_every_trial([&](const OracleIO& io) {
        return [&io](size_t r, size_t o) {
          for (auto& in : io.inputs[r])
            if (in.numel() == io.outputs[r][o].numel()) return in.values;  // its own input, passed through
          return std::vector<double>(io.outputs[r][o].numel(), 0.0);
        };
      })) << where << ": the inputs passed through pass three trials";
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace pkb
