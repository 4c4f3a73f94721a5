#include "report/charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/svg.hpp"

namespace pkb {

const char* run_color(size_t i) {
  // Okabe-Ito, reordered so neighbouring runs contrast.
  static const char* const palette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"};
  return palette[i % 8];
}

namespace {

constexpr const char* kAxis = "#555";
constexpr const char* kGrid = "#e3e3e3";
constexpr double kLegendRow = 20, kLegendColumn = 220;

constexpr double kMinPlotWidth = 560;

/// Width of one problem's slot on a categorical axis, so that few problems still fill the plot.
double band_for(const Leaderboard& b, double min_width) {
  return min_width / static_cast<double>(std::max<size_t>(1, b.problems.size()));
}

/// The plot area inside a canvas.
struct Frame {
  double left, top, width, height;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

double legend_height(const Leaderboard& b, double canvas_width) {
  size_t per_row = std::max<size_t>(1, static_cast<size_t>((canvas_width - 40) / kLegendColumn));
  return kLegendRow * static_cast<double>((b.runs.size() + per_row - 1) / per_row) + 8;
}

/// Colour swatch and name of every run, in rows, starting at y.
void draw_legend(Svg& svg, const Leaderboard& b, double y) {
  size_t per_row = std::max<size_t>(1, static_cast<size_t>((svg.width() - 40) / kLegendColumn));
  for (size_t i = 0; i < b.runs.size(); ++i) {
    double x = 40 + kLegendColumn * static_cast<double>(i % per_row);
    double yy = y + kLegendRow * static_cast<double>(i / per_row);
    svg.rect(x, yy - 10, 12, 12, run_color(i));
    std::string name = b.runs[i].name.size() > 30 ? b.runs[i].name.substr(0, 29) + "…" : b.runs[i].name;
    svg.text(x + 18, yy, name, 12);
  }
}

/// Horizontal grid line and label at each y value.
template <typename ToY>
void y_grid(Svg& svg, const Frame& f, const std::vector<std::pair<double, std::string>>& ticks, ToY to_y) {
  for (auto& [v, label] : ticks) {
    double y = to_y(v);
    svg.line(f.left, y, f.right(), y, kGrid);
    svg.text(f.left - 6, y + 4, label, 11, "end");
  }
  svg.line(f.left, f.top, f.left, f.bottom(), kAxis);
  svg.line(f.left, f.bottom(), f.right(), f.bottom(), kAxis);
}

/// Problem names under a categorical x axis, rotated so long stems fit.
template <typename ToX>
void problem_labels(Svg& svg, const Frame& f, const Leaderboard& b, ToX center_of) {
  for (size_t i = 0; i < b.problems.size(); ++i) svg.text(center_of(i) + 4, f.bottom() + 12, b.problems[i].stem, 11, "end", -40);
}

/// The step function p -> fast_p(p) of one run on [0, pmax]: constant between the run's best
/// speedups, dropping just after each (fast_p counts speedup > p).
std::vector<std::pair<double, double>> fast_p_steps(const RunSummary& run, double pmax) {
  std::vector<double> breaks;
  for (auto& s : run.best_speedups)
    if (s && *s > 0 && *s < pmax) breaks.push_back(*s);
  std::sort(breaks.begin(), breaks.end());
  breaks.erase(std::unique(breaks.begin(), breaks.end()), breaks.end());
  std::vector<std::pair<double, double>> pts{{0.0, run.fast_at(0.0)}};
  for (double s : breaks) {
    pts.emplace_back(s, pts.back().second);
    pts.emplace_back(s, run.fast_at(s));
  }
  pts.emplace_back(pmax, run.fast_at(pmax));
  return pts;
}

}  // namespace

std::string fast_p_chart(const Leaderboard& b) {
  const double width = 640, pmax = 3.0;
  Frame f{56, 24, width - 56 - 24, 260};
  Svg svg(width, f.bottom() + 44 + legend_height(b, width), "fast-p",
          "fast_p: share of problems correct and more than p times faster");
  auto to_x = [&](double p) { return f.left + f.width * p / pmax; };
  auto to_y = [&](double v) { return f.bottom() - f.height * v; };
  y_grid(svg, f, {{0, "0"}, {0.25, "0.25"}, {0.5, "0.5"}, {0.75, "0.75"}, {1, "1"}}, to_y);
  for (int i = 0; i <= 6; ++i) {
    double p = 0.5 * i;
    svg.line(to_x(p), f.bottom(), to_x(p), f.bottom() + 4, kAxis);
    svg.text(to_x(p), f.bottom() + 17, fmt::format("{}", p), 11, "middle");
  }
  svg.line(to_x(1), f.top, to_x(1), f.bottom(), kAxis, 1, "4 3");
  svg.text(to_x(1) + 4, f.top + 12, "baseline speed", 11);
  svg.text(f.left + f.width / 2, f.bottom() + 34, "p (speedup threshold)", 12, "middle");
  svg.text(16, f.top + f.height / 2, "fast_p", 12, "middle", -90);
  for (size_t i = 0; i < b.runs.size(); ++i) {
    std::vector<std::pair<double, double>> pts;
    for (auto& [p, v] : fast_p_steps(b.runs[i], pmax)) pts.emplace_back(to_x(p), to_y(v));
    svg.polyline(pts, run_color(i), 2.5);
  }
  draw_legend(svg, b, f.bottom() + 58);
  return svg.str();
}

std::string speedup_chart(const Leaderboard& b) {
  size_t nr = std::max<size_t>(1, b.runs.size());
  double band = std::max(band_for(b, kMinPlotWidth), 10.0 * static_cast<double>(nr) + 8);
  Frame f{64, 24, band * static_cast<double>(std::max<size_t>(1, b.problems.size())), 260};
  double width = f.right() + 24;
  Svg svg(width, f.bottom() + 120 + legend_height(b, width), "speedup", "Best correct speedup per problem (log scale)");
  double lo = 0.5, hi = 2.0;
  for (auto& run : b.runs)
    for (auto& [stem, c] : run.cells)
      if (c.best_speedup && *c.best_speedup > 0) lo = std::min(lo, *c.best_speedup), hi = std::max(hi, *c.best_speedup);
  double e_lo = std::floor(std::log2(lo)), e_hi = std::ceil(std::log2(hi));
  auto to_y = [&](double s) { return f.bottom() - f.height * (std::log2(s) - e_lo) / (e_hi - e_lo); };
  std::vector<std::pair<double, std::string>> ticks;
  for (double e = e_lo; e <= e_hi; ++e) ticks.emplace_back(std::exp2(e), fmt::format("{}x", std::exp2(e)));
  y_grid(svg, f, ticks, to_y);
  svg.line(f.left, to_y(1), f.right(), to_y(1), kAxis, 1.5, "4 3");
  svg.text(18, f.top + f.height / 2, "speedup over baseline", 12, "middle", -90);
  double bar = (band - 8) / static_cast<double>(nr);
  auto center_of = [&](size_t p) { return f.left + band * (static_cast<double>(p) + 0.5); };
  for (size_t p = 0; p < b.problems.size(); ++p) {
    for (size_t r = 0; r < b.runs.size(); ++r) {
      double x = f.left + band * static_cast<double>(p) + 4 + bar * static_cast<double>(r);
      auto it = b.runs[r].cells.find(b.problems[p].stem);
      if (it == b.runs[r].cells.end()) continue;
      std::string who = b.runs[r].name + " / " + b.problems[p].stem;
      if (auto s = it->second.best_speedup) {
        double y1 = to_y(1), y2 = to_y(*s);
        svg.rect(x, std::min(y1, y2), std::max(bar - 1, 1.0), std::max(std::fabs(y2 - y1), 1.0), run_color(r),
                 fmt::format("{}: {:.2f}x", who, *s));
      } else {
        svg.text(x + bar / 2, to_y(1) - 3, "×", 12, "middle", 0, run_color(r));
        svg.rect(x, to_y(1) - 12, std::max(bar - 1, 1.0), 12, "transparent",
                 who + ": no correct timed sample (" + std::string(to_string(it->second.shown())) + ")");
      }
    }
  }
  problem_labels(svg, f, b, center_of);
  draw_legend(svg, b, f.bottom() + 112);
  return svg.str();
}

std::string roofline_chart(const Leaderboard& b) {
  double band = std::max(band_for(b, kMinPlotWidth), 36.0);
  Frame f{64, 24, band * static_cast<double>(std::max<size_t>(1, b.problems.size())), 220};
  double width = f.right() + 24;
  Svg svg(width, f.bottom() + 120 + legend_height(b, width), "roofline", "Achieved fraction of the roofline per problem");
  auto to_y = [&](double pct) { return f.bottom() - f.height * std::clamp(pct, 0.0, 100.0) / 100.0; };
  y_grid(svg, f, {{0, "0%"}, {25, "25%"}, {50, "50%"}, {75, "75%"}, {100, "100%"}}, to_y);
  svg.text(18, f.top + f.height / 2, "% of roofline", 12, "middle", -90);
  auto center_of = [&](size_t p) { return f.left + band * (static_cast<double>(p) + 0.5); };
  size_t nr = std::max<size_t>(1, b.runs.size());
  int shown = 0;
  for (size_t p = 0; p < b.problems.size(); ++p) {
    int here = 0;
    for (size_t r = 0; r < b.runs.size(); ++r) {
      auto it = b.runs[r].cells.find(b.problems[p].stem);
      if (it == b.runs[r].cells.end() || !it->second.roofline_pct) continue;
      double spread = std::min(6.0, 24.0 / static_cast<double>(nr));
      double x = center_of(p) + (static_cast<double>(r) - (static_cast<double>(nr) - 1) / 2) * spread;
      double pct = *it->second.roofline_pct;
      svg.circle(x, to_y(pct), 4.5, run_color(r),
                 fmt::format("{} / {}: {:.1f}% of roofline", b.runs[r].name, b.problems[p].stem, pct));
      ++here;
    }
    // A problem without any measurement says so at its foot, rather than looking like 0%.
    if (here == 0) svg.text(center_of(p), f.bottom() - 6, "n/m", 10, "middle", 0, "#999");
    shown += here;
  }
  if (shown == 0)
    svg.text(f.left + f.width / 2, f.top + f.height / 2, "roofline not measured (no record carries a roofline yet)", 14, "middle",
             0, "#888");
  problem_labels(svg, f, b, center_of);
  draw_legend(svg, b, f.bottom() + 112);
  return svg.str();
}

}  // namespace pkb
