#include "eval/profile_out.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"

namespace pkb {

namespace fs = std::filesystem;
using nlohmann::json;

void check_profile_dir(const std::string& dir) {
  if (dir.empty()) throw Error(Errc::invalid_argument, "--profile needs a directory");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(Errc::invalid_argument, "--profile " + dir + ": not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error(Errc::invalid_argument, "--profile " + dir + ": cannot create the directory: " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(Errc::invalid_argument, "--profile " + dir + ": the directory is not writable");
}

SideOutcome side_outcome(const std::string& label, const StepResult& step, int world, double algbw_bytes, double hbm_bytes) {
  SideOutcome out{label, std::nullopt, ""};
  if (step.profile.size() != static_cast<size_t>(world)) {
    out.reason = "no rank reported a profile";
    return out;
  }
  profile::SideProfile side;
  side.label = label;
  if (algbw_bytes > 0) side.algbw_bytes = algbw_bytes;
  if (hbm_bytes > 0) side.hbm_bytes = hbm_bytes;
  for (int r = 0; r < world; ++r) {
    const json& b = step.profile[static_cast<size_t>(r)];
    if (b.contains("error")) {
      out.reason = "rank " + std::to_string(r) + ": " + (b["error"].is_string() ? b["error"].get<std::string>() : "?");
      return out;
    }
    if (!b.contains("activity")) {
      out.reason = "rank " + std::to_string(r) + " reported no activity";
      return out;
    }
    try {
      profile::RankProfile rp = profile::rank_from_json(b["activity"]);
      rp.rank = r;  // the rank is the frame's channel, not what the frame says
      side.ranks.push_back(std::move(rp));
    } catch (const Error& e) {
      out.reason = "rank " + std::to_string(r) + ": " + e.what();
      return out;
    }
  }
  out.side = std::move(side);
  return out;
}

namespace {

/// A label or a sweep's size as a file name part: letters, digits, '-', '.', '_'.
std::string file_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ? c : '_';
  return out.empty() ? "side" : out;
}

std::string bounded(std::string text) {
  if (text.size() <= kProfileTextBytes) return text;
  text.resize(kProfileTextBytes - 4);
  return text + "...\n";
}

}  // namespace

json write_profiles(const std::string& dir, const std::string& stem, const std::vector<SideOutcome>& sides) {
  json out{{"dir", dir}, {"sides", json::array()}};
  std::vector<profile::SideProfile> collected;
  for (const SideOutcome& s : sides) {
    if (!s.side) {
      out["sides"].push_back({{"label", s.label}, {"collected", false}, {"reason", s.reason}});
      continue;
    }
    fs::path trace = fs::path(dir) / (file_part(stem) + "-" + file_part(s.label) + ".trace.json");
    fs::path summary = fs::path(dir) / (file_part(stem) + "-" + file_part(s.label) + ".summary.txt");
    fs::path activity = fs::path(dir) / (file_part(stem) + "-" + file_part(s.label) + ".activity.json");
    profile::Summary sum = profile::summarize(*s.side);
    std::string text = profile::summary_text(sum);
    try {
      write_file_atomic(trace, profile::chrome_trace({*s.side}).dump());
      write_file_atomic(summary, text);
      write_file_atomic(activity, profile::to_json(*s.side).dump());
    } catch (const Error& e) {
      out["sides"].push_back({{"label", s.label}, {"collected", false}, {"reason", e.what()}});
      continue;
    }
    out["sides"].push_back({{"label", s.label},
                            {"collected", true},
                            {"trace", trace.string()},
                            {"summary", summary.string()},
                            {"activity", activity.string()},
                            {"calls", sum.calls},
                            {"median_call_ms", sum.median_call_ms},
                            {"text", bounded(text)}});
    collected.push_back(*s.side);
  }
  if (collected.size() > 1) {
    fs::path merged = fs::path(dir) / (file_part(stem) + ".trace.json");
    try {
      write_file_atomic(merged, profile::chrome_trace(collected).dump());
      out["merged"] = merged.string();
    } catch (const Error& e) {
      out["merged_error"] = e.what();
    }
  }
  return out;
}

std::string profile_lines(const json& p) {
  if (!p.is_object()) return "";
  std::string t;
  bool any = false;
  for (auto& s : p.value("sides", json::array())) {
    std::string label = s.value("label", std::string("?"));
    if (s.value("collected", false)) {
      any = true;
      t += fmt::format("  profile    {}: {} ({} calls, median {:.4f} ms)\n             {}\n", label,
                       s.value("trace", std::string()), s.value("calls", 0), s.value("median_call_ms", 0.0),
                       s.value("summary", std::string()));
    } else {
      t += fmt::format("  profile    {}: profile not collected: {}\n", label, s.value("reason", std::string("?")));
    }
  }
  if (p.contains("merged")) t += fmt::format("  profile    both sides: {}\n", p["merged"].get<std::string>());
  if (any) t += "             open a .trace.json in https://ui.perfetto.dev (or chrome://tracing)\n";
  return t;
}

}  // namespace pkb
