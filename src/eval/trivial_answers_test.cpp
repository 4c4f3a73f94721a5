// No problem admits a trivial answer: for every problem with a CPU oracle, at its smallest size class
// and W = 2 and 4, on the inputs of an eval's first trials drawn as the workers draw them, a
// solution that returns zeros, ones, or its own inputs passed through (where an input has the
// output's size) must fail the problem's tolerance against the oracle on some trial, rank and
// output. (One trial alone may allow it: a random split matrix can keep every row at home.) This guards the input design (grids,
// scales, tolerances) of every spec: a port whose outputs sit below atol, or whose answer does not depend on the data, fails here
// on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "eval/compare.hpp"
#include "eval/internal.hpp"
#include "proto/plan.hpp"
#include "spec/oracle.hpp"
#include "spec/registry.hpp"
#include "spec/spec.hpp"

namespace pkb {
namespace {

/// Inputs of one trial as the workers draw them, and the oracle's outputs.
OracleIO oracle_io(const Instance& inst, OracleFn fn, uint64_t seed, uint64_t trial) {
  OracleIO io;
  io.world = inst.world;
  io.vars = call_vars(inst, stream_seed(seed, trial), trial);
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

/// Whether `got` passes against `want` under comparison `c`, as the checks compare.
bool passes(const std::vector<double>& got, const std::vector<double>& want, const Comparison& c) {
  std::string_view bytes(reinterpret_cast<const char*>(got.data()), got.size() * sizeof(double));
  return compare_to_values(bytes, DType::fp64, want, c).ok();
}

/// Whether the trivial solution `answer(rank, output)` passes every rank's every output of trial `t`.
template <typename Answer>
bool trivial_passes(const Instance& inst, const OracleIO& io, uint64_t t, Answer answer) {
  for (size_t r = 0; r < io.outputs.size(); ++r)
    for (size_t o = 0; o < io.outputs[r].size(); ++o)
      if (!passes(answer(r, o), io.outputs[r][o].values,
                  for_call(inst.ranks[r].outputs[o].compare, inst.heldout && heldout_trial(t))))
        return false;
  return true;
}

/// The inputs of `io` with every held-out input snapped back to its grid (the nearest k * a,
/// k clamped to [lo, hi]): what a solution that moves the grid's integer codes computes from.
OracleIO snapped(const Instance& inst, OracleIO io) {
  for (size_t r = 0; r < io.inputs.size(); ++r)
    for (size_t i = 0; i < io.inputs[r].size(); ++i) {
      const Dist& d = inst.ranks[r].inputs[i].dist;
      if (!d.heldout) continue;
      for (double& v : io.inputs[r][i].values)
        v = std::clamp(std::nearbyint(v / d.a), static_cast<double>(d.lo), static_cast<double>(d.hi)) * d.a;
    }
  for (auto& outs : io.outputs)
    for (auto& o : outs) std::fill(o.values.begin(), o.values.end(), 0.0);
  return io;
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
        for (size_t t = 0; t < trials.size(); ++t)
          if (!trivial_passes(inst, trials[t], t, answer_for(trials[t]))) return false;
        return true;
      };
      std::string where = spec.stem + " W=" + std::to_string(world) + " " + inst.size_name;
      for (double c : {0.0, 1.0})
        EXPECT_FALSE(in_every_trial([&](const OracleIO& io) {
          return [&io, c](size_t r, size_t o) { return std::vector<double>(io.outputs[r][o].numel(), c); };
        })) << where
            << ": the constant " << c << " passes three trials";
      EXPECT_FALSE(in_every_trial([&](const OracleIO& io) {
        return [&io](size_t r, size_t o) {
          for (auto& in : io.inputs[r])
            if (in.numel() == io.outputs[r][o].numel()) return in.values;  // its own input, passed through
          return std::vector<double>(io.outputs[r][o].numel(), 0.0);
        };
      })) << where
          << ": the inputs passed through pass three trials";
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

// Every problem whose inputs leave their grid in held-out calls catches a solution specialised to
// the grid: one that computes from the grid's integer codes (int8 traffic instead of bf16, say) is
// exact on the spec's trials and must fail the held-out trial, on the CPU, against the oracle.
TEST(TrivialAnswers, HeldOutTrialsCatchSolutionsSpecialisedToTheGrid) {
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
        continue;
      }
      inst.spec = &spec;
      if (!inst.heldout) continue;
      // A grid of more than 2^12 steps is no narrower code than the dtype itself: snapping to it
      // moves values less than their own rounding, so there is nothing to specialise to.
      long long steps = 0;
      for (auto& tp : inst.ranks[0].inputs)
        if (tp.dist.heldout) steps = std::max(steps, static_cast<long long>(tp.dist.hi - tp.dist.lo));
      if (steps > 4096) continue;
      // Problems whose own rounding noise exceeds what snapping to the grid changes, with the reason.
      if (spec.id == 25) continue;  // bf16 log-probs near -ln V: one ulp is 3-6 % of a ratio (its [heldout] rtol)
      std::string where = spec.stem + " W=" + std::to_string(world) + " " + inst.size_name;
      uint64_t seed = 0x4e1d0000ull + static_cast<uint64_t>(spec.id);
      OracleIO grid = oracle_io(inst, fn, seed, 0), held = oracle_io(inst, fn, seed, 1);
      // On the grid the specialised answer is the right one.
      OracleIO g = snapped(inst, grid);
      fn(g);
      EXPECT_TRUE(trivial_passes(inst, grid, 0, [&](size_t r, size_t o) { return g.outputs[r][o].values; })) << where;
      OracleIO h = snapped(inst, held);
      fn(h);
      double worst = 0;  // the largest relative L2 error of an output, for the message
      for (size_t r = 0; r < h.outputs.size(); ++r)
        for (size_t o = 0; o < h.outputs[r].size(); ++o) {
          const auto& v = h.outputs[r][o].values;
          std::string_view bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
          worst = std::max(worst, compare_to_values(bytes, DType::fp64, held.outputs[r][o].values,
                                                    for_call(inst.ranks[r].outputs[o].compare, true))
                                      .rel_l2);
        }
      EXPECT_FALSE(trivial_passes(inst, held, 1, [&](size_t r, size_t o) { return h.outputs[r][o].values; }))
          << where << ": an answer computed from grid-snapped inputs passes the held-out trial (worst relative L2 error " << worst
          << ")";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);  // 22 problem/W pairs on 2026-12-02: the test must not quietly check nothing
}

// Host generation (oracle path) honours shared_by: ranks with one group value get one draw, every
// trial; other groups differ. The worker keys its draws with the same input_key (worker/session.cpp).
TEST(HostGeneration, SharedByDrawsAlikeWithinAGroup) {
  TensorPlan tp;
  tp.name = "x";
  tp.dtype = DType::fp32;
  tp.shape = {64};
  for (uint64_t t = 0; t < 2; ++t) {
    std::vector<std::string> by_rank;
    for (int r = 0; r < 4; ++r) {
      tp.dist.share_group = r / 2;
      by_rank.push_back(detail::generate_input(tp, 77, t, r, 0));
    }
    EXPECT_EQ(by_rank[0], by_rank[1]);
    EXPECT_EQ(by_rank[2], by_rank[3]);
    EXPECT_NE(by_rank[0], by_rank[2]);
  }
}

}  // namespace
}  // namespace pkb
