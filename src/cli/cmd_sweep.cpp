// `pkb sweep`: a problem over a range of sizes, baseline and candidate side by side.
#include <fmt/format.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "eval/profile_out.hpp"
#include "eval/sweep.hpp"

namespace pkb::cli {

Command sweep_command() {
  return {"sweep", "Time a problem over a range of sizes (nccl-tests style): baseline vs candidate, algbw, busbw, % of link",
          [](CLI::App& sub) {
            struct Opts {
              SweepOptions s;
              std::string b = "8K", e = "256M";
              bool quiet = false;
              std::string arch = "sm_90";
            };
            auto o = std::make_shared<Opts>();
            o->s.eval.trials = 1;
            o->s.eval.iters = 50;
            o->s.eval.warmup = 50;
            sub.add_option("problem", o->s.eval.problem, "Problem id, stem or name")->required();
            sub.add_option("--solution,-S", o->s.eval.solution, "Candidate .cu (default: the baseline alone)");
            sub.add_option("-b,--begin", o->b, "Smallest size (bytes; K/M/G suffixes)");
            sub.add_option("-e,--end", o->e, "Largest size");
            sub.add_option("-f,--factor", o->s.factor, "Multiply the size by this each step");
            sub.add_option("--var", o->s.var, "The size variable to scale (default M)");
            sub.add_option("--classes", o->s.classes, "Sweep these named size classes instead of a byte range ('all': every one)")
                ->default_str("")
                ->delimiter(',');
            sub.add_flag("--graph", o->s.graph, "Also time CUDA-graph replays of the calls (pure device time)");
            sub.add_option("--gpus,-g", o->s.eval.gpus, "World size W (default: all visible)")
                ->default_str("")  // 0 stands for "all visible"; --help says so in words
                ->check(at_least(1, kGpusHint))
                ->envname("PKB_GPUS");
            declare_oversubscribe(sub, o->s.eval.oversubscribe);
            sub.add_option("--dtype", o->s.eval.dtype, "Benchmark dtype")->envname("PKB_DTYPE");
            sub.add_option("--iters", o->s.eval.iters, "Timed calls per size (each checked)")->check(at_least(1));
            sub.add_option("--warmup", o->s.eval.warmup, "Warm-up calls per size (capped at ~2 s)")->check(at_least(0));
            sub.add_option("--trials", o->s.eval.trials, "Whole-output trials per size (sizes over 64 MiB of output use none)")
                ->check(at_least(0));
            sub.add_option("--timeout", o->s.eval.timeout_s, "Deadline in seconds per phase");
            sub.add_option("--json", o->s.eval.json_out, "Append one record per size to this file");
            declare_profile(sub, o->s.eval.profile_dir);
            sub.add_option("--arch", o->arch, "nvcc -arch for solutions");
            sub.add_option("--problems-dir", o->s.eval.problems_dir, "Problem folders")->envname("PKB_PROBLEMS_DIR");
            sub.add_flag("--quiet,-q", o->quiet, "No progress line");
            return std::function<int()>([o] {
              auto b = parse_size(o->b), e = parse_size(o->e);
              if (!b || !e) throw Error(Errc::invalid_argument, "sweep: -b/-e take sizes such as 8K, 1M, 1G");
              o->s.begin_bytes = *b;
              o->s.end_bytes = *e;
              // A reversed range or a factor <= 1 is bad input whatever the machine: say so before
              // the GPUs are looked for.
              if (o->s.classes.empty()) (void)sweep_sizes(o->s.begin_bytes, o->s.end_bytes, o->s.factor);
              o->s.eval.compile.arch = o->arch;
              o->s.eval.progress = !o->quiet && isatty(2);
              o->s.eval.worker_exe = self_dir() + "/pkb-worker";
              o->s.eval.argv = invocation();
              auto rows = run_sweep(o->s);
              fmt::print("{}", format_sweep_table(o->s, rows));
              for (auto& r : rows) fmt::print("{}", profile_lines(r.record.profile));
              int rc = 0;
              for (auto& r : rows) rc = std::max(rc, exit_code_for(r.record));
              return rc;
            });
          }};
}

}  // namespace pkb::cli
