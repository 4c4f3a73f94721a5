// `pkb calibrate`: measure this machine once and store the facts the roofline and prompts use.
#include <fmt/format.h>
#include <unistd.h>

#include "calibrate/calibrate.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "eval/system.hpp"

namespace pkb::cli {

namespace {

void print_facts(const HardwareFacts& h, const std::vector<PairRate>& pairs) {
  fmt::print("{} x{} (driver {}, NCCL {}), {}; measured {}\n", h.gpu_name, h.gpu_count, h.driver, h.nccl, h.topology,
             h.measured_at);
  if (!pairs.empty()) {
    fmt::print("  {:<8} {:>12} {:>12} {:>12}   GB/s, one direction\n", "pair", "SM stores", "SM loads", "copy engine");
    for (auto& p : pairs)
      fmt::print("  {} -> {}   {:>12.1f} {:>12.1f} {:>12.1f}\n", p.from, p.to, p.store_gbps, p.load_gbps, p.ce_gbps);
  }
  auto row = [](const char* what, double v, const char* unit) {
    if (v > 0) fmt::print("  {:<44} {:>9.2f} {}\n", what, v, unit);
    else fmt::print("  {:<44} {:>9} {}\n", what, "-", unit);
  };
  row("peer link, SM stores (median over pairs)", h.link_store_gbps, "GB/s");
  row("peer link, SM loads (median over pairs)", h.link_load_gbps, "GB/s");
  row("peer link, copy engine (median over pairs)", h.link_ce_gbps, "GB/s");
  row("ring push, all GPUs at once (per GPU)", h.ring_gbps, "GB/s");
  row("all-to-all push, all GPUs at once (egress)", h.all_to_all_gbps, "GB/s");
  row("HBM copy (read + write)", h.hbm_gbps, "GB/s");
  row("GEMM bf16 (cuBLAS)", h.gemm_bf16_tflops, "TFLOP/s");
  row("GEMM fp32 (cuBLAS)", h.gemm_fp32_tflops, "TFLOP/s");
  row("kernel launch, back to back", h.launch_us, "us");
  row("cross-GPU flag round trip", h.flag_rtt_us, "us");
  row("NCCL all-reduce 8 KiB, all GPUs (eager)", h.nccl_allreduce_8k_us, "us");
}

}  // namespace

Command calibrate_command() {
  return {"calibrate", "Measure this machine (links, HBM, GEMM, latencies) once; the roofline and prompts use it",
          [](CLI::App& sub) {
            struct Opts {
              int gpus = 0;
              bool quick = false, show = false;
              std::string out;
            };
            auto o = std::make_shared<Opts>();
            sub.add_option("--gpus,-g", o->gpus, "GPUs to measure (default: all visible)")
                ->default_str("")  // 0 stands for "all visible"; --help says so in words
                ->check(at_least(1, kGpusHint))
                ->envname("PKB_GPUS");
            sub.add_flag("--quick", o->quick, "Smaller transfers and GEMMs (less precise, a few seconds)");
            sub.add_flag("--show", o->show, "Print the stored calibration of this machine and exit");
            sub.add_option("--out", o->out, "Also write the JSON here");
            return std::function<int()>([o] {
              SystemInfo sys = probe_system();
              if (sys.gpu_count == 0) throw Error(Errc::invalid_argument, "no GPU is visible (" + sys.error + ")");
              int n = o->gpus > 0 ? o->gpus : sys.gpu_count;
              if (o->show) {
                auto h = load_calibration(sys.gpu_name, n, sys.nvidia_driver);
                if (!h) throw Error(Errc::not_found, "this machine has not been calibrated: run `pkb calibrate`");
                print_facts(*h, {});
                fmt::print("stored in {}\n", calibration_path(sys.gpu_name, n, sys.nvidia_driver).string());
                return 0;
              }
              CalibrateOptions co;
              co.gpus = n;
              if (o->quick) {
                co.link_bytes = 64u << 20;
                co.hbm_bytes = 256u << 20;
                co.gemm_n = 4096;
                co.reps = 3;
              }
              bool tty = isatty(2);
              co.progress = [tty](int i, int n_steps, const std::string& what) {
                std::fprintf(stderr, tty ? "\r\033[K[calibrate %d/%d] %s" : "[calibrate %d/%d] %s\n", i, n_steps, what.c_str());
              };
              CalibrateResult r = calibrate(co);
              if (tty) std::fprintf(stderr, "\r\033[K");
              save_calibration(r.facts);
              if (!o->out.empty()) write_file_atomic(o->out, to_json(r.facts).dump(2) + "\n");
              print_facts(r.facts, r.pairs);
              fmt::print("stored in {}\n", calibration_path(r.facts.gpu_name, r.facts.gpu_count, r.facts.driver).string());
              return 0;
            });
          }};
}

}  // namespace pkb::cli
