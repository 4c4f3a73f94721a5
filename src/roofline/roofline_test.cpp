#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "roofline/hardware.hpp"
#include "roofline/roofline.hpp"
#include "spec/registry.hpp"

namespace pkb {
namespace {

TEST(Roofline, FloorIsTheSlowestResourcePlusALaunch) {
  HardwareFacts c;
  c.link_store_gbps = 370;  // GB/s
  c.hbm_gbps = 4000;
  c.gemm_bf16_tflops = 800;
  c.launch_us = 2;
  HardwareFacts peaks = datasheet_facts("NVIDIA H200", 4);
  Work w;
  w.link_bytes = 3.7e6;  // 10 us at 370 GB/s
  w.hbm_bytes = 4e6;  // 1 us
  w.flops = 8e8;  // 1 us
  w.algbw_bytes = 2e6;
  w.busbw_factor = 1.5;
  Roofline r = compute_roofline(w, c, peaks, DType::bf16, 24.0, "calibrated");
  EXPECT_NEAR(r.link_us, 10.0, 1e-9);
  EXPECT_EQ(r.bound, "link");
  EXPECT_NEAR(r.floor_us, 12.0, 1e-9);
  EXPECT_NEAR(r.pct, 50.0, 1e-9);
  EXPECT_NEAR(r.algbw_gbps, 2e6 / 24e3, 1e-9);
  EXPECT_NEAR(r.busbw_gbps, 1.5 * 2e6 / 24e3, 1e-9);
  EXPECT_NEAR(r.link_gbps, 370.0, 1e-9);  // what link_pct divides by, recorded beside it
  EXPECT_NEAR(r.link_pct, 100.0 * r.busbw_gbps / 370.0, 1e-9);
  EXPECT_EQ(to_json(r, w).value("link_gbps", 0.0), 370.0);
  EXPECT_FALSE(r.impossible);
  // Faster than the datasheet allows: 3.7 MB at 450 GB/s takes 8.2 us.
  EXPECT_TRUE(compute_roofline(w, c, peaks, DType::bf16, 5.0, "calibrated").impossible);
  // fp32 uses the fp32 matrix rate.
  w.flops = 6.7e8;
  c.gemm_fp32_tflops = 67;
  w.link_bytes = 0;
  EXPECT_NEAR(compute_roofline(w, c, peaks, DType::fp32, 100, "calibrated").flop_us, 10.0, 1e-9);
}

TEST(Roofline, AllReduceWorkMatchesNcclTestsFactors) {
  auto all = discover_problems(std::filesystem::path(std::getenv("PKB_SOURCE_DIR")) / "problems");
  Spec s = load_spec(find_problem(all, "allreduce").dir);
  Instance inst = resolve(s, 4, {"default", {}}, DType::bf16);
  auto w = instance_work(inst);
  ASSERT_TRUE(w);
  double S = 1024.0 * 1024 * 2;
  EXPECT_DOUBLE_EQ(w->algbw_bytes, S);
  EXPECT_DOUBLE_EQ(w->busbw_factor, 1.5);
  EXPECT_DOUBLE_EQ(w->link_bytes, 1.5 * S);
}

TEST(Hardware, JsonRoundTrip) {
  HardwareFacts h;
  h.gpu_name = "NVIDIA H200";
  h.gpu_count = 4;
  h.link_load_gbps = 373;
  h.nccl_allreduce_8k_us = 15;
  HardwareFacts g = hardware_from_json(to_json(h));
  EXPECT_EQ(g.gpu_name, h.gpu_name);
  EXPECT_DOUBLE_EQ(g.link_gbps(), 373);
  EXPECT_DOUBLE_EQ(g.nccl_allreduce_8k_us, 15);
  EXPECT_NE(calibration_path("NVIDIA H200", 4, "580.1").filename().string().find("NVIDIA_H200-x4-580.1"), std::string::npos);
}

}  // namespace
}  // namespace pkb
