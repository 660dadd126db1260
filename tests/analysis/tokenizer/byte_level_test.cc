// The GPT-2 split pattern run by RegexSplitter, other patterns, and bytes_to_unicode, against
// expectations worked out by hand from the regexes' Oniguruma semantics (HF tokenizers) and
// GPT-2's encoder.py.
#include "analysis/tokenizer/byte_level.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/tokenizer/regex_splitter.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis::internal {
namespace {

using Pieces = std::vector<std::string>;

Pieces SplitBy(std::string_view pattern, std::string_view text) {
  absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter = RegexSplitter::Create(pattern);
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  Pieces pieces;
  RegexBudget budget = RegexBudget::ForText(text.size());
  absl::StatusOr<std::vector<std::string_view>> split = (*splitter)->Split(text, &budget);
  EXPECT_TRUE(split.ok()) << split.status();
  for (const std::string_view piece : split.value_or(std::vector<std::string_view>{})) {
    pieces.emplace_back(piece);
  }
  return pieces;
}

Pieces Split(std::string_view text) { return SplitBy(kGpt2SplitPattern, text); }

// Qwen2's pattern (tokenizers/qwen2_5/tokenizer.json): case-insensitive contractions, a
// letter run may take one leading non-letter, digits one at a time, newlines kept apart.
constexpr char kQwenPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(RegexSplitterTest, QwenPatternFoldsCaseAndSplitsDigitsAndNewlines) {
  EXPECT_EQ(SplitBy(kQwenPattern, "IT'S 2024"), (Pieces{"IT", "'S", " ", "2", "0", "2", "4"}));
  EXPECT_EQ(SplitBy(kQwenPattern, "(hello)\n\n  world"),
            (Pieces{"(hello", ")\n\n", " ", " world"}));
}

TEST(RegexSplitterTest, GapsBetweenMatchesArePiecesToo) {
  EXPECT_EQ(SplitBy("[0-9]+", "ab12cd345"), (Pieces{"ab", "12", "cd", "345"}));
  // A pattern that can match the empty string cuts nothing there.
  EXPECT_EQ(SplitBy("x*", "axxb"), (Pieces{"a", "xx", "b"}));
}

TEST(RegexSplitterTest, APatternThatDoesNotCompileIsAnError) {
  absl::StatusOr<std::unique_ptr<RegexSplitter>> splitter = RegexSplitter::Create("(\\p{L}");
  ASSERT_FALSE(splitter.ok());
  EXPECT_EQ(splitter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(splitter.status().message().find("does not compile"), std::string_view::npos)
      << splitter.status();
}

TEST(SplitGpt2PatternTest, WordsTakeOneLeadingSpace) {
  EXPECT_EQ(Split("Hello world, 42 times!"),
            (Pieces{"Hello", " world", ",", " 42", " times", "!"}));
}

TEST(SplitGpt2PatternTest, LowerCaseContractionsAreSplitOffUpperCaseAreNot) {
  EXPECT_EQ(Split("it's we're I'LL"), (Pieces{"it", "'s", " we", "'re", " I", "'", "LL"}));
  EXPECT_EQ(Split("'s'll'd"), (Pieces{"'s", "'ll", "'d"}));
  EXPECT_EQ(Split(" 's"), (Pieces{" '", "s"}));
}

TEST(SplitGpt2PatternTest, SpaceRunLeavesItsLastSpaceToTheNextWord) {
  EXPECT_EQ(Split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(Split("a \tb"), (Pieces{"a", " ", "\t", "b"}));
  EXPECT_EQ(Split("a\t\tb"), (Pieces{"a", "\t", "\t", "b"}));
  EXPECT_EQ(Split("end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(Split("x\n\n y"), (Pieces{"x", "\n\n", " y"}));
}

TEST(SplitGpt2PatternTest, MarksAndSymbolsArePunctuationRuns) {
  // NFD e + U+0301: the combining mark is neither a letter nor a number.
  EXPECT_EQ(Split("cafe\u0301s"), (Pieces{"cafe", "\u0301", "s"}));
  EXPECT_EQ(Split("a ?!b"), (Pieces{"a", " ?!", "b"}));
  EXPECT_EQ(Split("x\u00b2"), (Pieces{"x", "\u00b2"}));  // No is \p{N}.
}

// Where JavaScript's \s (transformers.js) differs from Oniguruma's: NEL is White_Space,
// U+FEFF is not.
TEST(SplitGpt2PatternTest, NextLineIsWhitespaceAndByteOrderMarkIsNot) {
  EXPECT_EQ(Split("x\u0085\u0085y"), (Pieces{"x", "\u0085", "\u0085", "y"}));
  EXPECT_EQ(Split("a \ufeffb"), (Pieces{"a", " \ufeff", "b"}));
}

TEST(SplitGpt2PatternTest, PiecesConcatenateBackToTheText) {
  const std::string text =
      "  \u4f60\u597d\uff0c\u4e16\u754c\uff01 \U0001F600\U0001F603 12\u0661 \t";
  std::string joined;
  for (const std::string& piece : Split(text)) joined += piece;
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(Split("").empty());
}

TEST(ByteToUnicodeTest, PrintableBytesStayAndOthersShiftPast255) {
  const auto& table = ByteToUnicode();
  EXPECT_EQ(table['A'], "A");
  EXPECT_EQ(table['!'], "!");
  EXPECT_EQ(table[0xE9], "\u00e9");
  EXPECT_EQ(table[' '], "\u0120");   // Ġ
  EXPECT_EQ(table['\n'], "\u010a");  // Ċ
  EXPECT_EQ(table[0], "\u0100");
  EXPECT_EQ(table[0x7F], "\u0121");
  EXPECT_EQ(table[0xAD], "\u0143");  // Ń, the soft hyphen
  EXPECT_EQ(BytesToUnicode(" h\xC3\xA9"), "\u0120h\u00c3\u00a9");
}

TEST(SanitizeUtf8Test, InvalidSequencesBecomeReplacementCharacters) {
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\uFFFD"
            "b");
  EXPECT_EQ(SanitizeUtf8("a\xC3"), "a\uFFFD");                    // Truncated.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // Surrogate.
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\uFFFD\uFFFD");            // Overlong.
}

}  // namespace
}  // namespace anisoscope::analysis::internal
