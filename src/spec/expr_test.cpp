#include <gtest/gtest.h>

#include "core/error.hpp"
#include "spec/expr.hpp"

namespace pkb {
namespace {

double ev(const char* s, Vars v = {}) { return Expr::parse(s).eval(v); }

TEST(Expr, PrecedenceAndOperators) {
  EXPECT_DOUBLE_EQ(ev("1 + 2 * 3"), 7);
  EXPECT_DOUBLE_EQ(ev("(1 + 2) * 3"), 9);
  EXPECT_DOUBLE_EQ(ev("2 ** 3 ** 2"), 512);
  EXPECT_DOUBLE_EQ(ev("-2 ** 2"), -4);
  EXPECT_DOUBLE_EQ(ev("7 // 2"), 3);
  EXPECT_DOUBLE_EQ(ev("7 % 3"), 1);
  EXPECT_DOUBLE_EQ(ev("7 / 2"), 3.5);
  EXPECT_DOUBLE_EQ(ev("1 < 2 && 2 <= 2 && !(3 == 4) && 3 != 4"), 1);
  EXPECT_DOUBLE_EQ(ev("0 || 0"), 0);
  EXPECT_DOUBLE_EQ(ev("1 ? 10 : 20"), 10);
  EXPECT_DOUBLE_EQ(ev("0 ? 10 : 1 ? 30 : 40"), 30);
  EXPECT_DOUBLE_EQ(ev("min(3, 4) + max(3, 4) + cdiv(10, 4) + floor(2.5) + ceil(2.1) + abs(-1) + log2(8)"),
                   3 + 4 + 3 + 2 + 3 + 1 + 3);
  EXPECT_DOUBLE_EQ(ev("1e3 + 2.5"), 1002.5);
}

TEST(Expr, Variables) {
  Vars v{{"M", 1024}, {"N", 512}, {"W", 4}, {"rank", 1}};
  EXPECT_DOUBLE_EQ(ev("2 * (W - 1) / W * M * N", v), 2.0 * 3 / 4 * 1024 * 512);
  EXPECT_DOUBLE_EQ(ev("rank == 0 ? W * M : M", v), 1024);
  auto e = Expr::parse("M * N + K");
  EXPECT_EQ(e.variables(), (std::set<std::string>{"K", "M", "N"}));
  try {
    e.eval(v);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("unknown variable 'K'"), std::string::npos);
  }
}

TEST(Expr, ErrorsSayWhere) {
  for (const char* bad : {"1 +", "(1", "1 2", "foo(1)", "min(1)", "3 $ 4", ""}) {
    try {
      Expr::parse(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::parse_error) << bad;
      EXPECT_NE(std::string(e.what()).find("column"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ev("1 / 0"), Error);
  EXPECT_THROW(Expr::parse("M / 3").eval_int({{"M", 10}}), Error);
  EXPECT_EQ(Expr::parse("M / 2").eval_int({{"M", 10}}), 5);
}

}  // namespace
}  // namespace pkb
