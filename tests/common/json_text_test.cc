#include "common/json_text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace anisoscope
