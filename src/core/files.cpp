#include "core/files.hpp"

#include <fcntl.h>
#include <sys/file.h>
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
  // One write of the whole line under an exclusive lock: concurrent writers (a sharded batch, two
  // evals) never interleave, and a reader never sees half a record.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(Errc::io_error, "cannot append to " + path.string() + ": " + std::strerror(errno));
  std::string text(line);
  text += '\n';
  bool locked = ::flock(fd, LOCK_EX) == 0;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  if (locked) ::flock(fd, LOCK_UN);
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    fail(Errc::io_error, "short write to " + path.string() + (n < 0 ? std::string(": ") + std::strerror(err) : ""));
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
