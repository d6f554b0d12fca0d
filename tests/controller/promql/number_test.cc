#include "controller/promql/number.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hptrain::promql {
namespace {

TEST(PromqlParseFloatValueTest, AcceptsGoFloatSyntax) {
  struct Case {
    const char* text;
    double want;
  };
  const Case cases[] = {
      {"0", 0},
      {"1", 1},
      {"-2.5", -2.5},
      {"+3", 3},
      {"1e3", 1000},
      {"1E-3", 0.001},
      {".5", 0.5},
      {"5.", 5},
      {"+Inf", INFINITY},
      {"-Inf", -INFINITY},
      {"Inf", INFINITY},
      {"inf", INFINITY},
      {"+infinity", INFINITY},
      {"1e-400", 0},
      {"1.7976931348623157e308", 1.7976931348623157e308},
  };
  for (const Case& c : cases) {
    double value = -123;
    EXPECT_TRUE(ParseFloatValue(c.text, &value)) << c.text;
    EXPECT_EQ(value, c.want) << c.text;
  }
  for (const char* nan : {"NaN", "nan", "-NaN", "+nan"}) {
    double value = 0;
    EXPECT_TRUE(ParseFloatValue(nan, &value)) << nan;
    EXPECT_TRUE(std::isnan(value)) << nan;
  }
}

TEST(PromqlParseFloatValueTest, RejectsEverythingElse) {
  for (const char* text : {"", "+", "-", "--1", "+-1", "-+1", " 1", "1 ", "1x", "0x10", "0x1p3",
                           "nan(1)", "1e", "1e400", "-1e400", "1,5", "1_000", "e5", "Infx"}) {
    double value = 42;
    EXPECT_FALSE(ParseFloatValue(text, &value)) << "\"" << text << "\"";
    EXPECT_EQ(value, 42) << text;
  }
}

}  // namespace
}  // namespace hptrain::promql
