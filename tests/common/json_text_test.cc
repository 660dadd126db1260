#include "common/json_text.h"

#include <gtest/gtest.h>

#include <limits>

namespace anisoscope {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(JsonQuote("\t\r"), "\"\\t\\r\"");
}

TEST(JsonQuoteTest, KeepsUtf8AsItIs) {
  EXPECT_EQ(JsonQuote("Q̄ ≥ 0"), "\"Q̄ ≥ 0\"");
  EXPECT_EQ(JsonQuote(""), "\"\"");
}

TEST(JsonQuoteTest, ReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(JsonQuote("a\xff"), "\"a\xef\xbf\xbd\"");
}

TEST(JsonDoubleTest, NonFiniteValuesAreTheProtobufJsonStrings) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(JsonDoubleText(nan), "\"NaN\"");
  EXPECT_EQ(JsonDoubleText(inf), "\"Infinity\"");
  EXPECT_EQ(JsonDoubleText(-inf), "\"-Infinity\"");
  EXPECT_EQ(JsonDoubleText(0.1), "0.1");
  EXPECT_EQ(JsonDoubleText(-2), "-2");
  EXPECT_EQ(JsonDouble(nan).dump(), "\"NaN\"");
  EXPECT_EQ(JsonDouble(inf).dump(), "\"Infinity\"");
  EXPECT_EQ(JsonDouble(-inf).dump(), "\"-Infinity\"");
  EXPECT_EQ(JsonDouble(0.1).dump(), "0.1");
  EXPECT_EQ(NonFiniteName(1.5), nullptr);
}

}  // namespace
}  // namespace anisoscope
