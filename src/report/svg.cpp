#include "report/svg.hpp"

#include <fmt/format.h>

namespace pkb {

std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string tooltip_element(std::string_view tooltip) {
  return tooltip.empty() ? std::string() : "<title>" + xml_escape(tooltip) + "</title>";
}

}  // namespace

Svg::Svg(double width, double height, std::string id, std::string title)
    : width_(width), height_(height), id_(std::move(id)), title_(std::move(title)) {}

Svg& Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width, std::string_view dash) {
  body_ += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}")", x1, y1, x2, y2,
                       xml_escape(stroke), width);
  if (!dash.empty()) body_ += fmt::format(R"( stroke-dasharray="{}")", xml_escape(dash));
  body_ += "/>\n";
  return *this;
}

Svg& Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view tooltip) {
  body_ += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}">{}</rect>)", x, y, w, h,
                       xml_escape(fill), tooltip_element(tooltip));
  body_ += "\n";
  return *this;
}

Svg& Svg::circle(double cx, double cy, double r, std::string_view fill, std::string_view tooltip) {
  body_ += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}">{}</circle>)", cx, cy, r, xml_escape(fill),
                       tooltip_element(tooltip));
  body_ += "\n";
  return *this;
}

Svg& Svg::text(double x, double y, std::string_view s, double size, std::string_view anchor, double rotate,
               std::string_view fill) {
  std::string transform =
      rotate == 0 ? std::string() : fmt::format(R"svg( transform="rotate({} {:.1f} {:.1f})")svg", rotate, x, y);
  body_ += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}" fill="{}"{}>{}</text>)", x, y, size,
                       xml_escape(anchor), xml_escape(fill), transform, xml_escape(s));
  body_ += "\n";
  return *this;
}

Svg& Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width) {
  std::string pts;
  for (auto& [x, y] : points) pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", x, y);
  body_ += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round"/>)", pts,
                       xml_escape(stroke), width);
  body_ += "\n";
  return *this;
}

std::string Svg::str() const {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" id="{}" role="img" aria-label="{}" width="{:.0f}" height="{:.0f}" )"
      R"(viewBox="0 0 {:.0f} {:.0f}" font-family="system-ui, sans-serif">)"
      "\n<title>{}</title>\n{}</svg>\n",
      xml_escape(id_), xml_escape(title_), width_, height_, width_, height_, xml_escape(title_), body_);
}

}  // namespace pkb
