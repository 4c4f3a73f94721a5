// A small SVG writer for the report's plots: shapes with explicit attributes (so a plot copied out
// of the page still renders), every text escaped, numbers written with one decimal. It knows
// nothing about charts; report/charts.cpp draws with it.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pkb {

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(std::string_view s);

class Svg {
 public:
  /// A width x height canvas; `id` becomes the element id, `title` its accessible name.
  Svg(double width, double height, std::string id, std::string title);

  /// A line; `dash` like "4 3" for a dashed one.
  Svg& line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1, std::string_view dash = {});
  /// A filled rectangle; a non-empty `tooltip` becomes its <title> (hover text).
  Svg& rect(double x, double y, double w, double h, std::string_view fill, std::string_view tooltip = {});
  Svg& circle(double cx, double cy, double r, std::string_view fill, std::string_view tooltip = {});
  /// Text at (x, y); anchor is start, middle or end; `rotate` degrees about (x, y).
  Svg& text(double x, double y, std::string_view s, double size = 12, std::string_view anchor = "start", double rotate = 0,
            std::string_view fill = "#333");
  /// An open polyline through the points.
  Svg& polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width = 2);

  double width() const { return width_; }
  double height() const { return height_; }
  /// The complete <svg> element.
  std::string str() const;

 private:
  double width_, height_;
  std::string id_, title_, body_;
};

}  // namespace pkb
