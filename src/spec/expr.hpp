// A small arithmetic expression language for spec shapes, parameters, constraints and roofline
// formulas: numbers, variables (M, N, W, rank, e, ...), + - * / // % **, comparisons, && || !,
// `c ? a : b`, and min, max, ceil, floor, abs, log2, cdiv. Values are doubles; shapes must come
// out as non-negative integers (checked by the caller).
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace pkb {

using Vars = std::map<std::string, double, std::less<>>;

class Expr {
 public:
  struct Node;
  Expr() = default;
  /// Parses `text`; throws Error(parse_error) with the position of the problem.
  static Expr parse(std::string_view text);
  /// A constant.
  static Expr constant(double v);

  /// Evaluates with `vars`; throws Error(invalid_argument) naming an unknown variable, and on
  /// division by zero.
  double eval(const Vars& vars) const;
  /// Evaluates and requires an exact integer.
  long long eval_int(const Vars& vars) const;

  /// Every variable name the expression reads.
  std::set<std::string> variables() const;
  const std::string& text() const { return text_; }
  bool empty() const { return !root_; }

 private:
  std::shared_ptr<const Node> root_;  // immutable; sharing is safe
  std::string text_;
};

}  // namespace pkb
