// The phases a worker announces to the driver, in the only order it may: start, setup, load, then
// per step init, each trial, timing (when enabled), profile (with --profile), finalize; teardown
// last. On the wire a phase is a word ("setup", "trial 3"); in the driver it is this type, parsed
// once where the frame arrives.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace pkb {

struct Phase {
  enum class Kind { start, setup, load, init, trial, timing, profile, finalize, teardown };
  Kind kind = Kind::start;
  int trial = 0;  // with Kind::trial: which trial, from 0

  bool operator==(const Phase&) const = default;

  /// The wire word: "setup", "trial 3".
  std::string name() const {
    switch (kind) {
      case Kind::start: return "start";
      case Kind::setup: return "setup";
      case Kind::load: return "load";
      case Kind::init: return "init";
      case Kind::trial: return "trial " + std::to_string(trial);
      case Kind::timing: return "timing";
      case Kind::profile: return "profile";
      case Kind::finalize: return "finalize";
      case Kind::teardown: return "teardown";
    }
    return "?";
  }

  /// The phase a wire word names, exactly as name() writes it ("trial 03", "trial -1" and "Setup"
  /// are not phases); nullopt otherwise.
  static std::optional<Phase> parse(std::string_view word) {
    for (Kind k : {Kind::start, Kind::setup, Kind::load, Kind::init, Kind::timing, Kind::profile, Kind::finalize, Kind::teardown})
      if (word == Phase{k}.name()) return Phase{k};
    constexpr std::string_view kTrial = "trial ";
    if (word.substr(0, kTrial.size()) != kTrial) return std::nullopt;
    std::string_view digits = word.substr(kTrial.size());
    if (digits.empty() || digits.size() > 9 || (digits[0] == '0' && digits.size() > 1)) return std::nullopt;
    int t = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      t = 10 * t + (c - '0');
    }
    return Phase{Kind::trial, t};
  }
};

}  // namespace pkb
