// The HTML report rendered by a real browser: headless Chromium takes a screenshot (a PNG of the
// requested size) and dumps the DOM it built (the summary table, the matrix and the three SVG
// plots are elements in it). Skipped where no Chromium is installed (GPU machines; plain setups).
// $PKB_CHROMIUM names the browser binary; otherwise chromium or chromium-browser on PATH.
// Chromium runs with the network cut off: no proxy, every host name unresolvable, no background
// services, a fresh profile directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/files.hpp"
#include "proc/process.hpp"
#include "report/report.hpp"
#include "report/report_fixtures.hpp"

namespace pkb {
namespace {

namespace fs = std::filesystem;

std::optional<fs::path> chromium() {
  if (const char* c = std::getenv("PKB_CHROMIUM"); c && *c) return find_program(c);
  for (const char* name : {"chromium", "chromium-browser"})
    if (auto p = find_program(name)) return p;
  return std::nullopt;
}

struct Browser {
  fs::path exe, dir;

  CommandResult run(const std::vector<std::string>& extra) {
    SpawnOptions o;
    o.argv = {exe.string(),
              "--headless",
              "--no-sandbox",
              "--disable-gpu",
              "--disable-quic",
              "--no-first-run",
              "--disable-background-networking",
              "--disable-component-update",
              "--disable-sync",
              "--no-proxy-server",
              "--host-resolver-rules=MAP * ~NOTFOUND",
              "--user-data-dir=" + (dir / ("profile" + std::to_string(++runs))).string()};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.capture_output = true;
    return run_command(o, std::chrono::seconds(120), 8 << 20);
  }
  int runs = 0;
};

uint32_t big_endian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

class HtmlInBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    auto exe = chromium();
    if (!exe) GTEST_SKIP() << "no Chromium (install the chromium package or set PKB_CHROMIUM)";
    dir_ = fs::temp_directory_path() / ("pkb_html_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    browser_ = {*exe, dir_};
    std::ostringstream html;
    auto sink = make_html_reporter(html);
    emit_report(make_report(testing::two_run_rows(), {"fixture.jsonl"}), *sink);
    page_ = dir_ / "report.html";
    write_file_atomic(page_, html.str());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  fs::path dir_, page_;
  Browser browser_;
};

TEST_F(HtmlInBrowser, ScreenshotIsAPngOfTheRequestedSize) {
  fs::path png = dir_ / "shot.png";
  auto r = browser_.run({"--screenshot=" + png.string(), "--window-size=1280,900", "file://" + page_.string()});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_TRUE(fs::exists(png)) << "exit " << r.exit.describe() << "\n" << r.err;
  std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian32(bytes, 16), 1280u);
  EXPECT_EQ(big_endian32(bytes, 20), 900u);
  // A blank page compresses to a few kB; tables, colours and plots do not.
  EXPECT_GT(bytes.size(), 20000u);
}

TEST_F(HtmlInBrowser, DomHasTheTablesAndThePlots) {
  auto r = browser_.run({"--dump-dom", "file://" + page_.string()});
  ASSERT_FALSE(r.timed_out) << r.err;
  const std::string& dom = r.out;
  for (const char* want :
       {"<table id=\"summary\"", "<table id=\"matrix\"", "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"fast-p\"",
        "id=\"speedup\"", "id=\"roofline\"", "<polyline", "2/5 ok 1.50x", "model-a / 2_allgather: 3.00x"})
    EXPECT_NE(dom.find(want), std::string::npos) << want << "\n" << dom.substr(0, 2000) << "\nstderr: " << r.err;
}

}  // namespace
}  // namespace pkb
