#include "build/compiler.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>

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
// Where CMake found cuDNN (cudnn.h and libcudnn.so); empty when it found none.
#ifndef PKB_CUDNN_INCLUDE_DIR
#define PKB_CUDNN_INCLUDE_DIR ""
#endif
#ifndef PKB_CUDNN_LIB_DIR
#define PKB_CUDNN_LIB_DIR ""
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

/// The header named by a preprocessor line `#include <name>` or `#include "name"`, else empty.
std::string_view included_header(std::string_view code) {
  auto skip_blanks = [&] {
    while (!code.empty() && (code.front() == ' ' || code.front() == '\t')) code.remove_prefix(1);
  };
  skip_blanks();
  if (code.empty() || code.front() != '#') return {};
  code.remove_prefix(1);
  skip_blanks();
  if (code.substr(0, 7) != "include") return {};
  code.remove_prefix(7);
  skip_blanks();
  if (code.empty() || (code.front() != '<' && code.front() != '"')) return {};
  char close = code.front() == '<' ? '>' : '"';
  code.remove_prefix(1);
  auto end = code.find(close);
  return end == std::string_view::npos ? std::string_view{} : code.substr(0, end);
}

/// `line` without its comments; `in_block` carries an open /* ... */ from line to line.
std::string strip_comments(std::string_view line, bool& in_block) {
  std::string code;
  for (size_t i = 0; i < line.size(); ++i) {
    if (in_block) {
      if (line.compare(i, 2, "*/") == 0) in_block = false, ++i;
    } else if (line.compare(i, 2, "/*") == 0) {
      in_block = true, ++i;
    } else if (line.compare(i, 2, "//") == 0) {
      break;
    } else {
      code += line[i];
    }
  }
  return code;
}

bool system_include_dir(const std::string& dir) {
  return dir == "/usr/include" || dir == "/usr/local/include" || dir.rfind("/usr/include/x86_64-linux-gnu", 0) == 0 ||
         dir.rfind("/usr/include/aarch64-linux-gnu", 0) == 0;
}

std::vector<std::string> nvcc_argv(const std::filesystem::path& nvcc, const CompileOptions& opts,
                                   const std::vector<std::string>& libs, const std::filesystem::path& src,
                                   const std::filesystem::path& out) {
  // -cudart shared: one CUDA runtime in the worker process, shared by harness and solution (a static
  // copy in the solution would keep its own error state and could shadow the harness's symbols).
  std::vector<std::string> a{nvcc.string(), "-O3",
                             "-std=c++20",  "-arch=" + opts.arch,
                             "-shared",     "-Xcompiler",
                             "-fPIC",       "-cudart",
                             "shared",      "-I" + (pkb_home() / "include").string()};
  // Never -I a system directory: it reorders the system search path and breaks libstdc++'s
  // #include_next. The multiarch directory (/usr/include/x86_64-linux-gnu, where Ubuntu's cuDNN
  // lives) is a system directory too.
  const std::string nccl_inc = PKB_NCCL_INCLUDE_DIR, nccl_lib = PKB_NCCL_LIB_DIR;
  const std::string cudnn_inc = PKB_CUDNN_INCLUDE_DIR, cudnn_lib = PKB_CUDNN_LIB_DIR;
  bool cudnn = std::find(libs.begin(), libs.end(), "cudnn") != libs.end();
  if (!system_include_dir(nccl_inc)) a.push_back("-I" + nccl_inc);
  if (cudnn && !cudnn_inc.empty() && cudnn_inc != nccl_inc && !system_include_dir(cudnn_inc)) a.push_back("-I" + cudnn_inc);
  a.insert(a.end(), opts.extra_flags.begin(), opts.extra_flags.end());
  a.insert(a.end(), {src.string(), "-o", out.string(), "-L" + nccl_lib});
  if (cudnn && !cudnn_lib.empty() && cudnn_lib != nccl_lib) a.push_back("-L" + cudnn_lib);
  for (auto& l : libs) a.push_back("-l" + l);
  return a;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::vector<std::string> solution_libraries(std::string_view source) {
  std::vector<std::string> libs{"nccl", "cublas", "cublasLt"};
  bool cufft = false, cudnn = false, in_block = false;
  while (!source.empty()) {
    auto nl = source.find('\n');
    std::string code = strip_comments(source.substr(0, nl), in_block);
    source.remove_prefix(nl == std::string_view::npos ? source.size() : nl + 1);
    std::string_view h = included_header(code);
    if (auto slash = h.rfind('/'); slash != std::string_view::npos) h.remove_prefix(slash + 1);
    if (h == "cufft.h" || h == "cufftXt.h") cufft = true;
    if (h == "cudnn.h" || (h.substr(0, 6) == "cudnn_" && h.size() > 8 && h.substr(h.size() - 2) == ".h")) cudnn = true;
  }
  if (cufft) libs.push_back("cufft");
  if (cudnn) libs.push_back("cudnn");
  return libs;
}

bool cudnn_available() {
  std::string dir = PKB_CUDNN_INCLUDE_DIR;
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "cudnn.h", ec);
}

CompileResult compile_solution(const std::filesystem::path& source, const CompileOptions& opts) {
  CompileResult res;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    fail(Errc::not_found, "solution file " + source.string() + " does not exist or is not a file");
  if (access(source.c_str(), R_OK) != 0) fail(Errc::not_found, "solution file " + source.string() + " is not readable");
  std::filesystem::path nvcc = opts.nvcc.empty() ? default_nvcc() : opts.nvcc;
  std::string src = read_file(source);
  // What the solution links follows from what it includes, so that the cuDNN loader (slow) is only
  // paid by the solutions that use it. The source text is hashed below; the set is hashed too.
  std::vector<std::string> libs = solution_libraries(src);
  bool needs_cudnn = std::find(libs.begin(), libs.end(), "cudnn") != libs.end();

  // Everything that changes the binary goes into the key; the version stands for nvcc_argv's fixed
  // flags (v4: -std=c++20).
  Sha256 h;
  h.update("pkb-build-v4\n").update(src).update("\n--\n").update(nvcc_version(nvcc)).update(opts.arch);
  for (auto& l : libs) h.update("-l" + l + "\n");
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

  res.command = join_command(nvcc_argv(nvcc, opts, libs, source, res.so_path));
  if (needs_cudnn && !cudnn_available()) {  // a compile error, not cached: installing cuDNN fixes it
    res.log = "pkb: cuDNN is not available: " + source.filename().string() +
              " includes a cuDNN header, but no cuDNN 9 (cudnn.h and libcudnn.so) was found when pkb was "
              "configured. Install cuDNN and re-run cmake (it looks beside the CUDA toolkit and in the system "
              "directories).\n";
    return res;
  }

  if (opts.use_cache && std::filesystem::exists(res.so_path, ec)) {
    res.ok = true;
    res.cached = true;
    if (std::filesystem::exists(log_path, ec)) res.log = read_file(log_path);
    check_symbols();
    return res;
  }

  std::filesystem::path tmp = dir / (res.key + ".tmp." + std::to_string(getpid()) + ".so");
  auto argv = nvcc_argv(nvcc, opts, libs, source, tmp);
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
    if (needs_cudnn && res.log.find("cudnn") != std::string::npos)
      res.log += "\npkb: this solution uses cuDNN (found at configure time in " + std::string(PKB_CUDNN_INCLUDE_DIR) +
                 "); if nvcc cannot find cudnn.h or -lcudnn, reinstall cuDNN 9 and re-run cmake.\n";
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
