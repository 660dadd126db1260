// BasicTokenize: cleaning, CJK isolation, normalization and punctuation splitting.
#include "analysis/tokenizer/basic_tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anisoscope::analysis::internal {
namespace {

using Words = std::vector<std::string>;

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool IsValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2;
      lo = b == 0xE0 ? 0xA0 : 0x80;
      hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3;
      lo = b == 0xF0 ? 0x90 : 0x80;
      hi = b == 0xF4 ? 0x8F : 0xBF;
    } else if (b >= 0x80) {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if (t < lo || t > hi) return false;
      lo = 0x80;
      hi = 0xBF;
    }
    i += n + 1;
  }
  return true;
}

TEST(BasicTokenizeTest, LowerCasesAndStripsAccents) {
  EXPECT_EQ(BasicTokenize("H\u00e9llo W\u00d6RLD na\u00efve", true),
            (Words{"hello", "world", "naive"}));
}

TEST(BasicTokenizeTest, DecomposedAccentsAreStrippedToo) {
  EXPECT_EQ(BasicTokenize("cafe\u0301 A\u030angstro\u0308m", true), (Words{"cafe", "angstrom"}));
}

TEST(BasicTokenizeTest, CasedModeKeepsCaseAndComposesAccents) {
  EXPECT_EQ(BasicTokenize("H\u00e9llo cafe\u0301 WORLD", false),
            (Words{"H\u00e9llo", "caf\u00e9", "WORLD"}));
}

TEST(BasicTokenizeTest, SplitsEveryPunctuationCharacterOff) {
  EXPECT_EQ(BasicTokenize("don't stop!!", true), (Words{"don", "'", "t", "stop", "!", "!"}));
  EXPECT_EQ(BasicTokenize("\u201cquote\u201d\u2014dash", true),
            (Words{"\u201c", "quote", "\u201d", "\u2014", "dash"}));
}

TEST(BasicTokenizeTest, AsciiSymbolsArePunctuationButOtherSymbolsAreNot) {
  EXPECT_EQ(BasicTokenize("$5+3=8", true), (Words{"$", "5", "+", "3", "=", "8"}));
  EXPECT_EQ(BasicTokenize("\u20ac5 \u00a9x", true), (Words{"\u20ac5", "\u00a9x"}));
}

TEST(BasicTokenizeTest, IsolatesCjkIdeographsIncludingSupplementaryPlanes) {
  // transformers.js misses the astral ranges; HF's slow BertTokenizer isolates them.
  EXPECT_EQ(BasicTokenize("a\u6211b\U00020000c\uf900d", true),
            (Words{"a", "\u6211", "b", "\U00020000", "c", "\u8c48", "d"}));
}

TEST(BasicTokenizeTest, KanaAndHangulAreNotIsolated) {
  EXPECT_EQ(BasicTokenize("\u306e\u30c6\u30ad", true), (Words{"\u306e\u30c6\u30ad"}));
}

TEST(BasicTokenizeTest, DropsControlFormatPrivateUseAndUnassignedCodePoints) {
  EXPECT_EQ(BasicTokenize(std::string("a\x07"
                                      "b\u200b"
                                      "c\u0378"
                                      "d\ue000"
                                      "e\u00ad"
                                      "f\ufeffg"),
                          true),
            (Words{"abcdefg"}));
  EXPECT_EQ(BasicTokenize(std::string("nul\0byte", 8), true), (Words{"nulbyte"}));
}

TEST(BasicTokenizeTest, ReplacementCharacterIsDropped) {
  EXPECT_EQ(BasicTokenize("x\ufffdy \ufffd", true), (Words{"xy"}));
}

TEST(BasicTokenizeTest, InvalidUtf8BytesAreDroppedNotDecoded) {
  EXPECT_EQ(BasicTokenize("ab\xff\xfe"
                          "cd",
                          true),
            (Words{"abcd"}));
  // Overlong '/' must not become a slash; encoded surrogates and truncations vanish.
  EXPECT_EQ(BasicTokenize("x\xc0\xafy", true), (Words{"xy"}));
  EXPECT_EQ(BasicTokenize("x\xed\xa0\x80y", true), (Words{"xy"}));
  EXPECT_EQ(BasicTokenize("x\xe6\x88", true), (Words{"x"}));
  EXPECT_EQ(BasicTokenize("\xf4\x90\x80\x80z", true), (Words{"z"}));
  // A truncated sequence does not swallow the valid character after it.
  EXPECT_EQ(BasicTokenize("\xe6\x88"
                          "a",
                          true),
            (Words{"a"}));
}

TEST(BasicTokenizeTest, RandomBytesNeverCrashAndYieldValidUtf8Words) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 64);
  for (int round = 0; round < 3000; ++round) {
    std::string text(length(rng), '\0');
    for (char& c : text) c = static_cast<char>(byte(rng));
    for (const std::string& word : BasicTokenize(text, round % 2 == 0)) {
      ASSERT_FALSE(word.empty());
      ASSERT_TRUE(IsValidUtf8(word)) << word;
    }
  }
}

TEST(BasicTokenizeTest, AllWhitespaceKindsSeparateWords) {
  EXPECT_EQ(BasicTokenize("a\tb\nc\r\nd\u00a0e\u2003f\u3000g\u2028h\u2029i", true),
            (Words{"a", "b", "c", "d", "e", "f", "g", "h", "i"}));
}

TEST(BasicTokenizeTest, ZeroWidthCharactersJoinRatherThanSplit) {
  EXPECT_EQ(BasicTokenize("zero\u200bwidth\u200djoiner", true), (Words{"zerowidthjoiner"}));
}

TEST(BasicTokenizeTest, EmptyAndBlankTextHaveNoWords) {
  EXPECT_TRUE(BasicTokenize("", true).empty());
  EXPECT_TRUE(BasicTokenize(" \t\r\n\u00a0\u200b ", true).empty());
}

TEST(BasicTokenizeTest, WordOfOnlyCombiningMarksVanishesWhenUncased) {
  EXPECT_TRUE(BasicTokenize(" \u0301\u0308 ", true).empty());
}

TEST(BasicTokenizeTest, LowerCasingFollowsPythonFullCaseMapping) {
  // Final sigma in context, as Python's str.lower().
  EXPECT_EQ(BasicTokenize("\u039f\u0394\u039f\u03a3 \u03a3\u0391", true),
            (Words{"\u03bf\u03b4\u03bf\u03c2", "\u03c3\u03b1"}));
  // U+0130 lowers to "i\u0307", whose mark is then stripped.
  EXPECT_EQ(BasicTokenize("\u0130stanbul", true), (Words{"istanbul"}));
  EXPECT_EQ(BasicTokenize("\u1e9e \u212a", true), (Words{"\u00df", "k"}));
}

TEST(BasicTokenizeTest, CharacterClassesMatchBert) {
  EXPECT_TRUE(IsBertPunctuation(U'$'));
  EXPECT_TRUE(IsBertPunctuation(U'`'));
  EXPECT_TRUE(IsBertPunctuation(U'\u00bf'));
  EXPECT_FALSE(IsBertPunctuation(U'\u20ac'));
  EXPECT_FALSE(IsBertPunctuation(U'a'));
  EXPECT_FALSE(IsBertControl(U'\t'));
  EXPECT_FALSE(IsBertControl(U'\n'));
  EXPECT_TRUE(IsBertControl(U'\u0085'));
  EXPECT_TRUE(IsBertControl(U'\u200b'));
  EXPECT_TRUE(IsBertControl(U'\U000F0000'));
  EXPECT_TRUE(IsBertWhitespace(U'\u00a0'));
  EXPECT_TRUE(IsBertWhitespace(U'\u3000'));
  EXPECT_FALSE(IsBertWhitespace(U'\u200b'));
  EXPECT_TRUE(IsBertCjk(U'\u4e00'));
  EXPECT_TRUE(IsBertCjk(U'\U0002F800'));
  EXPECT_FALSE(IsBertCjk(U'\u3042'));
  EXPECT_FALSE(IsBertCjk(U'\uac00'));
}

}  // namespace
}  // namespace anisoscope::analysis::internal
