// Records the driver wrote, told from lines anybody else appended: every record pkb writes carries
// "mac", an HMAC-SHA256 of the record (without that field) under a key kept in this machine's pkb
// cache (record.key, 0600, made on first use). Workers that host candidate code run as another
// user (launch/launcher.hpp) and can read neither the key nor write the results file; a forged
// line therefore has no valid MAC, and readers that verify reject it with its file:line.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pkb {

/// This machine's record key; with `create`, made (32 random bytes, file mode 0600) if missing.
/// nullopt when there is none and it cannot or may not be made.
std::optional<std::string> record_key(bool create);

/// HMAC-SHA256 (hex) of the record's JSON text without its "mac" field.
std::string record_mac(const nlohmann::json& record, const std::string& key);

/// The record with its "mac" (unchanged where no key can be had: the reader then says it is unsigned).
nlohmann::json signed_record(nlohmann::json record);

/// What a verifying reader decided about lines it set aside, for the report to say.
struct RecordTrust {
  std::optional<std::string> key;  // this machine's key; without one nothing can be verified
  std::vector<std::string> rejected;  // "file:line: why"
  size_t unsigned_kept = 0;  // records without a MAC in files that have none (older pkb)
  /// Decides each line of one file: `macs[i]` is line i's "mac" (empty: none), `valid[i]` whether
  /// it verified. Returns which lines to keep; records the others in `rejected`.
  std::vector<bool> decide(const std::vector<std::string>& sources, const std::vector<std::string>& macs,
                           const std::vector<bool>& valid);
};

}  // namespace pkb
