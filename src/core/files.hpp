// File helpers with errors that name the path.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace pkb {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path);
/// Write to a temporary sibling and rename into place, so readers never see a partial file.
void write_file_atomic(const fs::path& path, std::string_view content);
/// Append one line (a newline is added) and flush, so a record survives a later crash.
void append_line(const fs::path& path, std::string_view line);

/// pkb's own tree (headers, problems): $PKB_HOME, else the source tree it was built from.
fs::path pkb_home();
/// The build cache: $PKB_CACHE_DIR, else $XDG_CACHE_HOME/pkb, else ~/.cache/pkb.
fs::path cache_dir();

}  // namespace pkb
