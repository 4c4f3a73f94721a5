#include "core/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

#ifndef PKB_SOURCE_DIR
#define PKB_SOURCE_DIR "."
#endif

namespace pkb {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Errc::not_found, "cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(Errc::io_error, "cannot write " + tmp.string() + ": " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) fail(Errc::io_error, "short write to " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    fail(Errc::io_error, "cannot rename into " + path.string() + ": " + ec.message());
  }
}

void append_line(const fs::path& path, std::string_view line) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::app);
  if (!out) fail(Errc::io_error, "cannot append to " + path.string() + ": " + std::strerror(errno));
  out << line << '\n';
  out.flush();
  if (!out) fail(Errc::io_error, "short write to " + path.string());
}

fs::path pkb_home() {
  if (const char* h = std::getenv("PKB_HOME"); h && *h) return h;
  return PKB_SOURCE_DIR;
}

fs::path cache_dir() {
  if (const char* d = std::getenv("PKB_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "pkb";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "pkb";
  return fs::temp_directory_path() / "pkb-cache";
}

}  // namespace pkb
