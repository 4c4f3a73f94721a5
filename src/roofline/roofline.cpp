#include "roofline/roofline.hpp"

#include <algorithm>

namespace pkb {

std::optional<Work> instance_work(const Instance& inst) {
  if (!inst.spec || !inst.spec->roofline) return std::nullopt;
  const RooflineSpec& rf = *inst.spec->roofline;
  Work w;
  for (int r = 0; r < inst.world; ++r) {
    Vars v = rank_vars(inst, r);
    w.link_bytes = std::max(w.link_bytes, rf.link_bytes.eval(v));
    w.flops = std::max(w.flops, rf.flops.eval(v));
    w.hbm_bytes = std::max(w.hbm_bytes, rf.hbm_bytes.eval(v));
    w.algbw_bytes = std::max(w.algbw_bytes, rf.algbw_bytes.eval(v));
    w.busbw_factor = rf.busbw_factor.eval(v);
  }
  return w;
}

HardwareFacts datasheet_facts(const std::string& gpu_name, int gpu_count) {
  HardwareFacts h;
  h.gpu_name = gpu_name;
  h.gpu_count = gpu_count;
  // NVLink 4: 18 links x 25 GB/s per direction. Hopper SXM dense bf16 989 TFLOP/s, fp32 67.
  h.link_store_gbps = h.link_load_gbps = h.link_ce_gbps = 450.0;
  h.gemm_bf16_tflops = 989.0;
  h.gemm_fp32_tflops = 67.0;
  h.hbm_gbps = gpu_name.find("H200") != std::string::npos ? 4800.0 : 3350.0;
  h.launch_us = 0.0;
  return h;
}

Roofline compute_roofline(const Work& w, const HardwareFacts& c, const HardwareFacts& peaks, DType dtype, double measured_us,
                          const std::string& source) {
  auto rate_flops = [&](const HardwareFacts& h) {
    return (dtype == DType::fp32 || dtype == DType::fp64) ? h.gemm_fp32_tflops : h.gemm_bf16_tflops;
  };
  auto us = [](double amount, double per_us) { return per_us > 0 ? amount / per_us : 0.0; };
  Roofline r;
  r.source = source;
  r.link_gbps = c.link_gbps();
  r.link_us = us(w.link_bytes, c.link_gbps() * 1e3);  // GB/s = 1e3 bytes per us
  r.flop_us = us(w.flops, rate_flops(c) * 1e6);  // TFLOP/s = 1e6 FLOP per us
  r.hbm_us = us(w.hbm_bytes, c.hbm_gbps * 1e3);
  r.launch_us = c.launch_us;
  double body = std::max({r.link_us, r.flop_us, r.hbm_us});
  r.bound = body == r.link_us ? "link" : (body == r.flop_us ? "compute" : "hbm");
  r.floor_us = body + r.launch_us;
  r.peak_floor_us = std::max(
      {us(w.link_bytes, peaks.link_gbps() * 1e3), us(w.flops, rate_flops(peaks) * 1e6), us(w.hbm_bytes, peaks.hbm_gbps * 1e3)});
  r.measured_us = measured_us;
  if (measured_us > 0) {
    r.pct = 100.0 * r.floor_us / measured_us;
    r.algbw_gbps = w.algbw_bytes / (measured_us * 1e3);
    r.busbw_gbps = r.algbw_gbps * w.busbw_factor;
    r.link_pct = c.link_gbps() > 0 ? 100.0 * r.busbw_gbps / c.link_gbps() : 0.0;
    r.impossible = measured_us < r.peak_floor_us;
  }
  return r;
}

nlohmann::json to_json(const Roofline& r, const Work& w) {
  return {{"source", r.source},
          {"floor_us", r.floor_us},
          {"bound", r.bound},
          {"link_us", r.link_us},
          {"flop_us", r.flop_us},
          {"hbm_us", r.hbm_us},
          {"launch_us", r.launch_us},
          {"peak_floor_us", r.peak_floor_us},
          {"measured_us", r.measured_us},
          {"pct", r.pct},
          {"algbw_gbps", r.algbw_gbps},
          {"busbw_gbps", r.busbw_gbps},
          {"link_pct", r.link_pct},
          {"link_gbps", r.link_gbps},
          {"impossible", r.impossible},
          {"link_bytes", w.link_bytes},
          {"flops", w.flops},
          {"hbm_bytes", w.hbm_bytes},
          {"algbw_bytes", w.algbw_bytes},
          {"busbw_factor", w.busbw_factor}};
}

}  // namespace pkb
