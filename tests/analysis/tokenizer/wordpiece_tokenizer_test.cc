// WordPieceTokenizer on a small vocab written to a temp file.
#include "analysis/tokenizer/wordpiece_tokenizer.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;

WordPieceTokenizer::Options MakeOptions(bool lower_case, int max_input_chars_per_word) {
  WordPieceTokenizer::Options options;
  options.lower_case = lower_case;
  options.max_input_chars_per_word = max_input_chars_per_word;
  return options;
}

// Line i is token id i.
const char* const kVocab[] = {"[PAD]",  "[UNK]", "[CLS]",  "[SEP]", "[MASK]", "un",     "##aff",
                              "##able", "runn",  "##ing",  "hello", ",",      "!",      "a",
                              "##a",    "want",  "##want", "##ed",  "wa",     "\u0436", "##\u0436"};

class WordPieceTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wordpiece_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path WriteVocab(const std::vector<std::string>& lines, const std::string& eol = "\n") {
    const fs::path path = dir_ / "vocab.txt";
    std::ofstream out(path, std::ios::binary);
    for (const std::string& line : lines) out << line << eol;
    return path;
  }
  fs::path WriteDefaultVocab() { return WriteVocab({std::begin(kVocab), std::end(kVocab)}); }

  std::unique_ptr<WordPieceTokenizer> MakeTokenizer(WordPieceTokenizer::Options options = {}) {
    auto tokenizer = WordPieceTokenizer::Create(WriteDefaultVocab(), options, FileGate::Host());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  fs::path dir_;
};

TEST_F(WordPieceTokenizerTest, SpecialIdsComeFromTheVocab) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->pad_id(), 0);
  EXPECT_EQ(tokenizer->unk_id(), 1);
  EXPECT_EQ(tokenizer->cls_id(), 2);
  EXPECT_EQ(tokenizer->sep_id(), 3);
  EXPECT_EQ(tokenizer->vocab_size(), static_cast<int64_t>(std::size(kVocab)));
}

TEST_F(WordPieceTokenizerTest, GreedyLongestMatchFirstWithContinuationPrefix) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Tokenize("UNwanted running"),
            (Tokens{"un", "##want", "##ed", "runn", "##ing"}));
  EXPECT_EQ(tokenizer->Encode("UNwanted running").value(), (std::vector<int64_t>{5, 16, 17, 8, 9}));
}

TEST_F(WordPieceTokenizerTest, WordWithUnmatchedRestBecomesOneUnk) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Tokenize("unwantedX running"), (Tokens{"[UNK]", "runn", "##ing"}));
  EXPECT_EQ(tokenizer->Encode("unwantedX, hello!").value(), (std::vector<int64_t>{1, 11, 10, 12}));
}

TEST_F(WordPieceTokenizerTest, LongWordBecomesUnk) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode(std::string(101, 'a')).value(), (std::vector<int64_t>{1}));
  const std::vector<int64_t> hundred = tokenizer->Encode(std::string(100, 'a')).value();
  ASSERT_EQ(hundred.size(), 100u);
  EXPECT_EQ(hundred[0], 13);
  EXPECT_EQ(hundred[99], 14);
}

TEST_F(WordPieceTokenizerTest, LongWordLimitCountsCodePointsNotBytes) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::string hundred;
  for (int i = 0; i < 100; ++i) hundred += "\u0436";
  EXPECT_EQ(tokenizer->Encode(hundred).value().size(), 100u);
  EXPECT_EQ(tokenizer->Encode(hundred + "\u0436").value(), (std::vector<int64_t>{1}));
}

TEST_F(WordPieceTokenizerTest, LongWordLimitIsConfigurable) {
  auto tokenizer = MakeTokenizer(MakeOptions(true, 3));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Tokenize("aaa aaaa"), (Tokens{"a", "##a", "##a", "[UNK]"}));
}

TEST_F(WordPieceTokenizerTest, CasedModeKeepsUpperCase) {
  auto tokenizer = MakeTokenizer(MakeOptions(false, 100));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Tokenize("Hello hello"), (Tokens{"[UNK]", "hello"}));
}

TEST_F(WordPieceTokenizerTest, EmptyTextEncodesToNothing) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(tokenizer->Encode("").value().empty());
  EXPECT_TRUE(tokenizer->Encode(" \n\t ").value().empty());
}

TEST_F(WordPieceTokenizerTest, InvalidUtf8NeverCrashesAndYieldsValidIds) {
  auto tokenizer = MakeTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("hel\xfflo \xc3").value(), (std::vector<int64_t>{10}));
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 2000; ++round) {
    std::string text(1 + round % 50, '\0');
    for (char& c : text) c = static_cast<char>(byte(rng));
    for (const int64_t id : std::vector<int64_t>(tokenizer->Encode(text).value())) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, tokenizer->vocab_size());
    }
  }
}

TEST_F(WordPieceTokenizerTest, VocabCrLfLineEndingsAreStripped) {
  auto tokenizer = WordPieceTokenizer::Create(
      WriteVocab({std::begin(kVocab), std::end(kVocab)}, "\r\n"), {}, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("hello").value(), (std::vector<int64_t>{10}));
  EXPECT_EQ((*tokenizer)->vocab_size(), static_cast<int64_t>(std::size(kVocab)));
}

TEST_F(WordPieceTokenizerTest, VocabWithoutFinalNewlineKeepsLastToken) {
  const fs::path path = dir_ / "vocab.txt";
  std::ofstream(path, std::ios::binary) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello";
  auto tokenizer = WordPieceTokenizer::Create(path, {}, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 5);
  EXPECT_EQ((*tokenizer)->Encode("hello").value(), (std::vector<int64_t>{4}));
}

TEST_F(WordPieceTokenizerTest, MissingVocabFileIsNotFoundAndNamesTheFile) {
  auto tokenizer = WordPieceTokenizer::Create(dir_ / "nope" / "vocab.txt", {}, FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("nope/vocab.txt"), std::string::npos);
}

TEST_F(WordPieceTokenizerTest, VocabWithoutSpecialTokenNamesFileAndToken) {
  auto tokenizer = WordPieceTokenizer::Create(WriteVocab({"[PAD]", "[UNK]", "[CLS]", "x"}), {},
                                              FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("vocab.txt"), std::string::npos);
  EXPECT_NE(tokenizer.status().message().find("[SEP]"), std::string::npos);
}

TEST_F(WordPieceTokenizerTest, EmptyVocabIsRejected) {
  auto tokenizer = WordPieceTokenizer::Create(WriteVocab({}), {}, FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("empty"), std::string::npos);
}

TEST_F(WordPieceTokenizerTest, VocabDirectoryIsRejected) {
  auto tokenizer = WordPieceTokenizer::Create(dir_, {}, FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WordPieceTokenizerTest, NonPositiveMaxInputCharsIsRejected) {
  auto tokenizer =
      WordPieceTokenizer::Create(WriteDefaultVocab(), MakeOptions(true, 0), FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::analysis
