#include "spec/expr.hpp"

#include <cctype>
#include <cmath>
#include <vector>

#include "core/error.hpp"

namespace pkb {

struct Expr::Node {
  enum Kind { num, var, unary, binary, ternary, call } kind;
  double value = 0;
  std::string name;  // variable, operator or function
  std::vector<std::shared_ptr<const Node>> kids;
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  NodeP parse_all() {
    NodeP n = ternary();
    skip();
    if (pos_ != s_.size()) error("unexpected '" + std::string(1, s_[pos_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(Errc::parse_error, "in expression `" + std::string(s_) + "` at column " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(pos_, tok.size()) == tok) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  static NodeP make(Expr::Node::Kind k, std::string name, std::vector<NodeP> kids, double v = 0) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->name = std::move(name);
    n->kids = std::move(kids);
    n->value = v;
    return n;
  }

  NodeP ternary() {
    NodeP c = logical_or();
    if (eat("?")) {
      NodeP a = ternary();
      if (!eat(":")) error("expected ':' in conditional");
      NodeP b = ternary();
      return make(Expr::Node::ternary, "?", {c, a, b});
    }
    return c;
  }
  NodeP logical_or() {
    NodeP l = logical_and();
    while (eat("||")) l = make(Expr::Node::binary, "||", {l, logical_and()});
    return l;
  }
  NodeP logical_and() {
    NodeP l = comparison();
    while (eat("&&")) l = make(Expr::Node::binary, "&&", {l, comparison()});
    return l;
  }
  NodeP comparison() {
    NodeP l = additive();
    for (std::string_view op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (eat(op)) return make(Expr::Node::binary, std::string(op), {l, additive()});
    }
    return l;
  }
  NodeP additive() {
    NodeP l = multiplicative();
    while (true) {
      if (eat("+")) l = make(Expr::Node::binary, "+", {l, multiplicative()});
      else if (eat("-")) l = make(Expr::Node::binary, "-", {l, multiplicative()});
      else return l;
    }
  }
  NodeP multiplicative() {
    NodeP l = unary();
    while (true) {
      skip();
      if (s_.substr(pos_, 2) == "**") return l;  // handled in power()
      if (eat("//")) l = make(Expr::Node::binary, "//", {l, unary()});
      else if (eat("*")) l = make(Expr::Node::binary, "*", {l, unary()});
      else if (eat("/")) l = make(Expr::Node::binary, "/", {l, unary()});
      else if (eat("%")) l = make(Expr::Node::binary, "%", {l, unary()});
      else return l;
    }
  }
  NodeP unary() {
    if (eat("-")) return make(Expr::Node::unary, "-", {unary()});
    if (eat("+")) return unary();
    skip();
    if (pos_ < s_.size() && s_[pos_] == '!' && s_.substr(pos_, 2) != "!=") {
      ++pos_;
      return make(Expr::Node::unary, "!", {unary()});
    }
    return power();
  }
  NodeP power() {
    NodeP base = primary();
    if (eat("**")) return make(Expr::Node::binary, "**", {base, unary()});
    return base;
  }
  NodeP primary() {
    skip();
    if (pos_ >= s_.size()) error("unexpected end");
    char c = s_[pos_];
    if (eat("(")) {
      NodeP n = ternary();
      if (!eat(")")) error("expected ')'");
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                  ((s_[pos_] == '+' || s_[pos_] == '-') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
        ++pos_;
      std::string tok(s_.substr(start, pos_ - start));
      char* end = nullptr;
      double v = std::strtod(tok.c_str(), &end);
      if (!end || *end != '\0') error("bad number '" + tok + "'");
      return make(Expr::Node::num, "", {}, v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string name(s_.substr(start, pos_ - start));
      if (eat("(")) {
        std::vector<NodeP> args;
        if (!eat(")")) {
          do args.push_back(ternary());
          while (eat(","));
          if (!eat(")")) error("expected ')' after arguments of " + name);
        }
        static const std::map<std::string, size_t> kArity{{"min", 2}, {"max", 2},  {"ceil", 1}, {"floor", 1},
                                                          {"abs", 1}, {"log2", 1}, {"cdiv", 2}};
        auto it = kArity.find(name);
        if (it == kArity.end()) error("unknown function '" + name + "'");
        if (args.size() != it->second) error(name + "() takes " + std::to_string(it->second) + " argument(s)");
        return make(Expr::Node::call, name, std::move(args));
      }
      return make(Expr::Node::var, name, {});
    }
    error("unexpected '" + std::string(1, c) + "'");
  }

  std::string_view s_;
  size_t pos_ = 0;
};

double eval_node(const Expr::Node& n, const Vars& vars, std::string_view text) {
  auto kid = [&](size_t i) { return eval_node(*n.kids[i], vars, text); };
  switch (n.kind) {
    case Expr::Node::num: return n.value;
    case Expr::Node::var: {
      auto it = vars.find(n.name);
      if (it == vars.end()) fail(Errc::invalid_argument, "unknown variable '" + n.name + "' in `" + std::string(text) + "`");
      return it->second;
    }
    case Expr::Node::unary: return n.name == "-" ? -kid(0) : (kid(0) == 0.0 ? 1.0 : 0.0);
    case Expr::Node::ternary: return kid(0) != 0.0 ? kid(1) : kid(2);
    case Expr::Node::call: {
      if (n.name == "min") return std::min(kid(0), kid(1));
      if (n.name == "max") return std::max(kid(0), kid(1));
      if (n.name == "ceil") return std::ceil(kid(0));
      if (n.name == "floor") return std::floor(kid(0));
      if (n.name == "abs") return std::fabs(kid(0));
      if (n.name == "log2") return std::log2(kid(0));
      double b = kid(1);
      if (b == 0.0) fail(Errc::invalid_argument, "division by zero in `" + std::string(text) + "`");
      return std::ceil(kid(0) / b);  // cdiv
    }
    case Expr::Node::binary: break;
  }
  const std::string& op = n.name;
  if (op == "&&") return (kid(0) != 0.0 && kid(1) != 0.0) ? 1.0 : 0.0;
  if (op == "||") return (kid(0) != 0.0 || kid(1) != 0.0) ? 1.0 : 0.0;
  double a = kid(0), b = kid(1);
  if (op == "+") return a + b;
  if (op == "-") return a - b;
  if (op == "*") return a * b;
  if (op == "**") return std::pow(a, b);
  if (op == "/" || op == "//" || op == "%") {
    if (b == 0.0) fail(Errc::invalid_argument, "division by zero in `" + std::string(text) + "`");
    if (op == "/") return a / b;
    if (op == "//") return std::floor(a / b);
    return a - b * std::floor(a / b);
  }
  if (op == "==") return a == b;
  if (op == "!=") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  fail(Errc::internal, "unknown operator " + op);
}

void collect(const Expr::Node& n, std::set<std::string>& out) {
  if (n.kind == Expr::Node::var) out.insert(n.name);
  for (auto& k : n.kids) collect(*k, out);
}

}  // namespace

Expr Expr::parse(std::string_view text) {
  Expr e;
  e.text_ = std::string(text);
  e.root_ = Parser(e.text_).parse_all();
  return e;
}

Expr Expr::constant(double v) {
  Expr e;
  auto n = std::make_shared<Node>();
  n->kind = Node::num;
  n->value = v;
  e.root_ = n;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  e.text_ = buf;
  return e;
}

double Expr::eval(const Vars& vars) const {
  if (!root_) fail(Errc::internal, "evaluating an empty expression");
  return eval_node(*root_, vars, text_);
}

long long Expr::eval_int(const Vars& vars) const {
  double v = eval(vars);
  double r = std::round(v);
  if (std::fabs(v - r) > 1e-9 * std::max(1.0, std::fabs(v)))
    fail(Errc::invalid_argument, "`" + text_ + "` = " + std::to_string(v) + " is not an integer");
  return static_cast<long long>(r);
}

std::set<std::string> Expr::variables() const {
  std::set<std::string> out;
  if (root_) collect(*root_, out);
  return out;
}

}  // namespace pkb
