#include <cstdio>

#include "eval/internal.hpp"
#include "report/safetensors.hpp"

namespace pkb::detail {

void dump_artifacts(const std::string& dir, const Prepared& p, const Instance& inst, uint64_t seed_value, const StepResult& job,
                    const std::string& side) {
  std::filesystem::path root = side.empty() ? std::filesystem::path(dir) : std::filesystem::path(dir) / side;
  char seed[24];
  std::snprintf(seed, sizeof seed, "%016llx", static_cast<unsigned long long>(seed_value));
  for (size_t t = 0; t < job.trials.size(); ++t)
    for (size_t r = 0; r < inst.ranks.size(); ++r) {
      const RankPlan& rp = inst.ranks[r];
      const RankTrial& rt = job.trials[t][r];
      std::vector<NamedTensor> tensors;
      for (size_t i = 0; i < rt.inputs.size(); ++i) {
        // A mutable input is reported after the call changed it; dump the values the call received.
        const TensorPlan& tp = rp.inputs[i];
        std::string bytes = tp.mutable_ ? generate_input(tp, seed_value, t, static_cast<int>(r), i) : rt.inputs[i];
        tensors.push_back({"input." + tp.name, tp.dtype, tp.shape, std::move(bytes)});
      }
      for (size_t o = 0; o < rt.outputs.size(); ++o)
        tensors.push_back({"output." + rp.outputs[o].name, rp.outputs[o].dtype, rp.outputs[o].shape, rt.outputs[o]});
      std::map<std::string, std::string> meta{{"problem", p.spec.stem},
                                              {"world", std::to_string(inst.world)},
                                              {"rank", std::to_string(r)},
                                              {"trial", std::to_string(t)},
                                              {"dtype", std::string(to_string(inst.dtype))},
                                              {"size", inst.size_name},
                                              {"seed", seed},
                                              {"side", side.empty() ? "solution" : side}};
      for (auto& [k, v] : inst.vars)
        if (k != "e") {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.17g", v);  // integers print as integers, reals in full
          meta["param." + k] = buf;
        }
      // Each output's own rule (exact, or its atol and rtol for this dtype, as the checks used it), so
      // that `pkb compare` of this dump against another side holds every output to it.
      for (auto& tp : rp.outputs) {
        char buf[64];
        if (tp.compare.exact()) std::snprintf(buf, sizeof buf, "exact");
        else std::snprintf(buf, sizeof buf, "%.17g %.17g", tp.compare.tol.atol, tp.compare.tol.rtol);
        meta["compare.output." + tp.name] = buf;
        if (tp.compare.nonfinite_as_expected) meta["nonfinite.output." + tp.name] = "as_expected";
        // A ragged output: `pkb compare` compares its counted rows only, as the checks did.
        if (tp.count_of >= 0) meta["count.output." + tp.name] = "output." + rp.outputs[static_cast<size_t>(tp.count_of)].name;
      }
      // A held-out trial: `pkb compare` holds its floating outputs to the norm-wise bound too.
      if (inst.heldout && heldout_trial(t))
        for (auto& tp : rp.outputs)
          if (!tp.compare.exact() && tp.compare.heldout_rtol > 0) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.17g", tp.compare.heldout_rtol);
            meta["heldout_rtol.output." + tp.name] = buf;
          }
      write_safetensors(root / ("trial_" + std::to_string(t)) / ("rank_" + std::to_string(r) + ".safetensors"), tensors, meta);
    }
}

}  // namespace pkb::detail
