// `pkb prompt <problem>`: the exact prompt `pkb generate` and `pkb agent` would send.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/gen_flags.hpp"
#include "core/files.hpp"
#include "spec/registry.hpp"

namespace pkb::cli {

Command prompt_command() {
  return {"prompt", "Render the generation prompt for a problem (task, baseline, ABI, shapes, hardware, rules, examples)",
          [](CLI::App& sub) {
            struct Opts {
              std::string problem, out;
              bool print = false;
              PromptFlags p;
            };
            auto o = std::make_shared<Opts>();
            sub.add_option("problem", o->problem, "Problem id (1), stem (1_allreduce) or name (allreduce)")->required();
            sub.add_flag("--print", o->print, "Write the prompt to stdout (the default without --out)");
            sub.add_option("--out,-o", o->out, "Write the prompt to this file");
            declare_prompt_flags(sub, o->p);
            return std::function<int()>([o] {
              PromptSetup setup = load_prompt_setup(o->p);
              Spec spec = load_spec(find_problem(discover_problems(problems_dir(o->p.problems_dir)), o->problem).dir);
              int world = world_for(spec, o->p, setup);
              Prompt prompt = build_prompt(spec, o->p, setup, world);
              if (o->print || o->out.empty()) fmt::print("{}", prompt.to_text());
              if (!o->out.empty()) {
                write_file_atomic(o->out, prompt.to_text());
                fmt::print(stderr, "pkb: prompt for {} (W={}) written to {} ({} bytes, sha256 {}); {}\n", spec.stem, world,
                           o->out, prompt.system.size() + prompt.user.size(), prompt.sha256().substr(0, 12), setup.hardware_note);
              }
              return 0;
            });
          }};
}

}  // namespace pkb::cli
