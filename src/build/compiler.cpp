#include "build/compiler.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "proc/process.hpp"

#ifndef PKB_NVCC_PATH
#define PKB_NVCC_PATH "nvcc"
#endif
#ifndef PKB_NCCL_INCLUDE_DIR
#define PKB_NCCL_INCLUDE_DIR "/usr/include"
#endif
#ifndef PKB_NCCL_LIB_DIR
#define PKB_NCCL_LIB_DIR "/usr/lib/x86_64-linux-gnu"
#endif

namespace pkb {

const std::vector<std::string>& required_entry_points() {
  static const std::vector<std::string> names{"pkb_init", "pkb_run", "pkb_finalize"};
  return names;
}

std::filesystem::path default_nvcc() {
  if (const char* p = std::getenv("PKB_NVCC"); p && *p) return p;
  if (auto p = find_program(PKB_NVCC_PATH)) return *p;
  if (auto p = find_program("nvcc")) return *p;
  if (auto p = find_program("/usr/local/cuda/bin/nvcc")) return *p;
  fail(Errc::not_found, "nvcc not found: install the CUDA toolkit or set PKB_NVCC");
}

std::string nvcc_version(const std::filesystem::path& nvcc) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(nvcc.string());
  if (it != memo.end()) return it->second;
  SpawnOptions o;
  o.argv = {nvcc.string(), "--version"};
  auto r = run_command(o, std::chrono::seconds(60));
  if (!r.exit.exited || r.exit.code != 0) fail(Errc::not_found, "cannot run " + nvcc.string() + " --version");
  std::string last;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) last = line;
  memo[nvcc.string()] = last;
  return last;
}

std::vector<std::string> defined_symbols(const std::filesystem::path& so) {
  auto nm = find_program("nm");
  if (!nm) return {};
  SpawnOptions o;
  o.argv = {nm->string(), "-D", "--defined-only", so.string()};
  auto r = run_command(o, std::chrono::seconds(60), 64 << 20);
  std::vector<std::string> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto pos = line.find_last_of(' ');
    if (pos != std::string::npos) out.push_back(line.substr(pos + 1));
  }
  return out;
}

namespace {

std::vector<std::string> nvcc_argv(const std::filesystem::path& nvcc, const CompileOptions& opts,
                                   const std::filesystem::path& src, const std::filesystem::path& out) {
  // -cudart shared: one CUDA runtime in the worker process, shared by harness and solution (a static
  // copy in the solution would keep its own error state and could shadow the harness's symbols).
  std::vector<std::string> a{nvcc.string(), "-O3", "-std=c++17", "-arch=" + opts.arch, "-shared", "-Xcompiler", "-fPIC",
                             "-cudart", "shared", "-I" + (pkb_home() / "include").string()};
  // Never -I a system directory: it reorders the system search path and breaks libstdc++'s
  // #include_next.
  std::string nccl_inc = PKB_NCCL_INCLUDE_DIR;
  if (nccl_inc != "/usr/include" && nccl_inc != "/usr/local/include") a.push_back("-I" + nccl_inc);
  a.insert(a.end(), opts.extra_flags.begin(), opts.extra_flags.end());
  a.insert(a.end(), {src.string(), "-o", out.string(), "-L" + std::string(PKB_NCCL_LIB_DIR), "-lnccl", "-lcublas", "-lcublasLt"});
  return a;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

CompileResult compile_solution(const std::filesystem::path& source, const CompileOptions& opts) {
  CompileResult res;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    fail(Errc::not_found, "solution file " + source.string() + " does not exist or is not a file");
  if (access(source.c_str(), R_OK) != 0) fail(Errc::not_found, "solution file " + source.string() + " is not readable");
  std::filesystem::path nvcc = opts.nvcc.empty() ? default_nvcc() : opts.nvcc;
  std::string src = read_file(source);

  // Everything that changes the binary goes into the key.
  Sha256 h;
  h.update("pkb-build-v2\n").update(src).update("\n--\n").update(nvcc_version(nvcc)).update(opts.arch);
  for (auto& f : opts.extra_flags) h.update(f).update("\n");
  h.update(read_file(pkb_home() / "include" / "pkb" / "solution.h"));
  // Headers beside the source (e.g. a solution set's shared .cuh) change the binary too.
  std::vector<std::filesystem::path> local;
  for (auto& e : std::filesystem::directory_iterator(source.parent_path().empty() ? "." : source.parent_path(), ec)) {
    auto ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".cuh" || ext == ".h" || ext == ".hpp" || ext == ".inl")) local.push_back(e.path());
  }
  std::sort(local.begin(), local.end());
  for (auto& f : local) h.update(f.filename().string()).update(read_file(f));
  res.key = h.hex();

  std::filesystem::path dir = (opts.cache_dir.empty() ? cache_dir() / "build" : opts.cache_dir) / res.key.substr(0, 2);
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(Errc::io_error, "cannot create build cache " + dir.string() + ": " + ec.message());
  res.so_path = dir / (res.key + ".so");
  std::filesystem::path log_path = dir / (res.key + ".log");

  auto check_symbols = [&] {
    auto syms = defined_symbols(res.so_path);
    if (syms.empty()) return;  // no nm: the worker checks at load time
    for (auto& name : required_entry_points())
      if (std::find(syms.begin(), syms.end(), name) == syms.end()) res.missing_entry_points.push_back(name);
  };

  if (opts.use_cache && std::filesystem::exists(res.so_path, ec)) {
    res.ok = true;
    res.cached = true;
    if (std::filesystem::exists(log_path, ec)) res.log = read_file(log_path);
    check_symbols();
    return res;
  }

  std::filesystem::path tmp = dir / (res.key + ".tmp." + std::to_string(getpid()) + ".so");
  auto argv = nvcc_argv(nvcc, opts, source, tmp);
  res.command = join_command(nvcc_argv(nvcc, opts, source, res.so_path));
  SpawnOptions o;
  o.argv = argv;
  o.limits.max_file_bytes = 2l << 30;  // 2 GiB per output file
  auto r = run_command(o, opts.timeout, opts.max_log_bytes);
  res.seconds = r.seconds;
  res.log = r.err + r.out;
  if (r.output_truncated) res.log += "\n[compiler output truncated]\n";
  if (r.timed_out) {
    res.timed_out = true;
    res.log += "\n[compile stopped after " + std::to_string(opts.timeout.count()) + " s]\n";
    std::filesystem::remove(tmp, ec);
    return res;
  }
  if (!r.exit.exited || r.exit.code != 0 || !std::filesystem::exists(tmp, ec)) {
    if (!r.exit.exited) res.log += "\n[nvcc ended by " + r.exit.describe() + "]\n";
    std::filesystem::remove(tmp, ec);
    return res;
  }
  std::filesystem::rename(tmp, res.so_path, ec);
  if (ec) fail(Errc::io_error, "cannot move the build into the cache: " + ec.message());
  write_file_atomic(log_path, res.log);
  res.ok = true;
  check_symbols();
  return res;
}

}  // namespace pkb
