// Building a solution: nvcc -> shared object, cached by content hash, with a deadline. The driver
// never loads the result (workers do); entry points are checked by reading the symbol table.
#pragma once
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pkb {

struct CompileOptions {
  std::filesystem::path nvcc;  // empty: $PKB_NVCC, the build's nvcc, or nvcc on PATH
  std::string arch = "sm_90";  // -arch value (sm_90, sm_90a, ...)
  std::vector<std::string> extra_flags;
  std::chrono::seconds timeout{300};
  std::filesystem::path cache_dir;  // empty: core cache_dir()/build
  bool use_cache = true;
  size_t max_log_bytes = 256 << 10;
};

struct CompileResult {
  bool ok = false;
  bool cached = false;
  bool timed_out = false;
  std::filesystem::path so_path;
  std::string key;  // cache key (sha256)
  std::string log;  // compiler output (errors and warnings)
  std::vector<std::string> missing_entry_points;
  double seconds = 0;
  std::string command;  // the nvcc command line, for the record
};

/// The entry points every solution must define.
const std::vector<std::string>& required_entry_points();

/// The libraries a solution links (names for -l), decided from its own source text alone so that
/// the build cache key, which hashes that text, covers the decision: nccl, cublas and cublasLt
/// always; cufft when it includes <cufft.h> or <cufftXt.h>; cudnn when it includes <cudnn.h> or any
/// <cudnn_*.h> (loading cuDNN takes seconds, so only its users pay for it). Commented-out includes
/// do not count.
std::vector<std::string> solution_libraries(std::string_view source);

/// Whether pkb was configured with cuDNN (its cudnn.h found, and still there).
bool cudnn_available();

/// Compiles `source` (or finds it in the cache). Never throws for compiler errors: they are in
/// the result (a solution that needs cuDNN where none is installed is one, with the reason in the
/// log). Throws Error for problems of pkb's own (no nvcc, unwritable cache).
CompileResult compile_solution(const std::filesystem::path& source, const CompileOptions& opts);

/// Dynamic symbols a shared object defines (via `nm -D --defined-only`); empty if nm is missing.
std::vector<std::string> defined_symbols(const std::filesystem::path& so);

/// `nvcc --version`'s last line, for provenance and the cache key.
std::string nvcc_version(const std::filesystem::path& nvcc);
std::filesystem::path default_nvcc();

}  // namespace pkb
