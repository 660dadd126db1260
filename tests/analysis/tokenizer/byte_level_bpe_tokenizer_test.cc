// ByteLevelBpeTokenizer on tiny hand-made tokenizer files: merge order, added tokens,
// normalization, invalid UTF-8, and the errors for bad files.
#include "analysis/tokenizer/byte_level_bpe_tokenizer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

// Byte-level symbols: Ġ = ' ', Ã ħ = the UTF-8 of U+00C5, ï ¿ ½ = the UTF-8 of U+FFFD.
constexpr char kVocab[] =
    R"({"a": 0, "b": 1, "Ġ": 2, "ab": 3, "aa": 4, "Ġab": 5, "Ġa": 6,
        "Ã": 10, "ħ": 11, "ï": 13, "¿": 14, "½": 15})";
// "a b" outranks "a a": "aab" is a + ab, not aa + b.
constexpr char kMerges[] = R"(["a b", "a a", "Ġ ab", "Ġ a"])";
constexpr char kAddedTokens[] = R"([
    {"id": 7, "content": "<s>", "special": true, "normalized": false},
    {"id": 8, "content": "  ", "special": false, "normalized": true},
    {"id": 9, "content": "   ", "special": false, "normalized": true},
    {"id": 12, "content": "Å", "special": false, "normalized": true}])";

std::string TokenizerJson(const std::string& pre_tokenizer = R"({"type": "ByteLevel"})",
                          const std::string& normalizer = R"({"type": "NFC"})",
                          const std::string& model_type = "BPE") {
  return std::string(R"({"version": "1.0", "added_tokens": )") + kAddedTokens +
         R"(, "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "model": {"type": ")" + model_type + R"(", "vocab": )" + kVocab + R"(, "merges": )" +
         kMerges + "}}";
}

class ByteLevelBpeTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bpe_tokenizer_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
    return dir_ / name;
  }
  std::unique_ptr<ByteLevelBpeTokenizer> FromJson(const std::string& json) {
    auto tokenizer = ByteLevelBpeTokenizer::FromTokenizerJson(Write("tokenizer.json", json));
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }
  // The error of loading `json`, which must mention every one of `needles`.
  void ExpectJsonError(const std::string& json, std::vector<std::string> needles) {
    auto tokenizer = ByteLevelBpeTokenizer::FromTokenizerJson(Write("tokenizer.json", json));
    ASSERT_FALSE(tokenizer.ok());
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
    needles.push_back((dir_ / "tokenizer.json").string());
    for (const std::string& needle : needles) {
      EXPECT_NE(tokenizer.status().message().find(needle), std::string::npos)
          << tokenizer.status() << " lacks " << needle;
    }
  }

  fs::path dir_;
};

TEST_F(ByteLevelBpeTokenizerTest, MergesApplyLowestRankFirst) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("aab"), (Ids{0, 3}));
  EXPECT_EQ(tokenizer->Encode(" ab"), (Ids{5}));
  EXPECT_EQ(tokenizer->Encode("ab ab"), (Ids{3, 5}));
  EXPECT_EQ(tokenizer->Encode(""), Ids{});
  EXPECT_EQ(tokenizer->vocab_size(), 16);
}

TEST_F(ByteLevelBpeTokenizerTest, AddedTokensSplitLeftmostLongestBeforeTheModel) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("ab   ab"), (Ids{3, 9, 3}));
  EXPECT_EQ(tokenizer->Encode("ab     ab"), (Ids{3, 9, 8, 3}));
  EXPECT_EQ(tokenizer->Encode("a<s>b"), (Ids{0, 7, 1}));
  EXPECT_EQ(tokenizer->TokenId("<s>"), 7);
}

TEST_F(ByteLevelBpeTokenizerTest, NormalizedAddedTokensMatchAfterNfc) {
  auto nfc = FromJson(TokenizerJson());
  ASSERT_NE(nfc, nullptr);
  // U+212B ANGSTROM SIGN and A + U+030A are both U+00C5 after NFC.
  EXPECT_EQ(nfc->Encode("\u212b"), (Ids{12}));
  EXPECT_EQ(nfc->Encode("A\u030a"), (Ids{12}));
  auto raw = FromJson(TokenizerJson(R"({"type": "ByteLevel"})", "null"));
  ASSERT_NE(raw, nullptr);
  // Without a normalizer the sign stays U+212B, whose bytes are not in this vocabulary.
  EXPECT_EQ(raw->Encode("\u212b"), Ids{});
}

TEST_F(ByteLevelBpeTokenizerTest, AddPrefixSpaceAndUseRegexAreHonoured) {
  auto prefixed = FromJson(TokenizerJson(R"({"type": "ByteLevel", "add_prefix_space": true})"));
  ASSERT_NE(prefixed, nullptr);
  EXPECT_EQ(prefixed->Encode("ab"), (Ids{5}));
  EXPECT_EQ(prefixed->Encode(" ab"), (Ids{5}));
  auto no_regex = FromJson(TokenizerJson(R"({"type": "ByteLevel", "use_regex": false})"));
  ASSERT_NE(no_regex, nullptr);
  // One word: a + b merge, then Ġ + ab.
  EXPECT_EQ(no_regex->Encode("ab ab"), (Ids{3, 5}));
  EXPECT_EQ(no_regex->Encode("a ab"), (Ids{0, 5}));
}

TEST_F(ByteLevelBpeTokenizerTest, InvalidUtf8IsEncodedAsReplacementCharacter) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("\xff"), (Ids{13, 14, 15}));
  EXPECT_EQ(tokenizer->Encode("a\xc3"), (Ids{0, 13, 14, 15}));
}

TEST_F(ByteLevelBpeTokenizerTest, ConcurrentEncodesAgree) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  std::vector<std::thread> threads;
  std::vector<Ids> results(4);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        results[t] = tokenizer->Encode("aab ab  ab" + std::string(i % 7, 'a') + " ab");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, results[0]);
}

TEST_F(ByteLevelBpeTokenizerTest, MalformedJsonNamesTheFile) {
  ExpectJsonError("{\"model\": ", {"malformed JSON"});
}

TEST_F(ByteLevelBpeTokenizerTest, MissingVocabOrMergesNamesTheField) {
  ExpectJsonError(
      R"({"model": {"type": "BPE", "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
      {"model.vocab", "missing"});
  ExpectJsonError(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}})",
      {"model.merges", "missing"});
  ExpectJsonError(R"({"pre_tokenizer": {"type": "ByteLevel"}})", {"'model'", "missing"});
}

TEST_F(ByteLevelBpeTokenizerTest, UnsupportedModelNormalizerOrPreTokenizerIsNamed) {
  ExpectJsonError(TokenizerJson(R"({"type": "ByteLevel"})", "null", "WordPiece"),
                  {"model.type", "WordPiece"});
  ExpectJsonError(TokenizerJson(R"({"type": "Metaspace"})"), {"pre_tokenizer.type", "Metaspace"});
  ExpectJsonError(TokenizerJson(R"({"type": "ByteLevel"})", R"({"type": "Lowercase"})"),
                  {"normalizer.type", "Lowercase"});
}

TEST_F(ByteLevelBpeTokenizerTest, MergeOfUnknownTokensIsAnError) {
  std::string json = TokenizerJson();
  json.replace(json.find("\"a a\""), 5, "\"a z\"");
  ExpectJsonError(json, {"model.merges", "merge 1", "\"z\""});
}

TEST_F(ByteLevelBpeTokenizerTest, UnsupportedAddedTokenOptionIsNamed) {
  std::string json = TokenizerJson();
  json.replace(json.find("\"special\": true"), 15, "\"special\": true, \"lstrip\": true");
  ExpectJsonError(json, {"added_tokens[0].lstrip"});
}

TEST_F(ByteLevelBpeTokenizerTest, MissingTokenizerJsonIsNotFound) {
  auto tokenizer = ByteLevelBpeTokenizer::FromTokenizerJson(dir_ / "absent" / "tokenizer.json");
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("absent/tokenizer.json"), std::string::npos);
}

TEST_F(ByteLevelBpeTokenizerTest, VocabAndMergesFilesLoadLikeGpt2) {
  const fs::path vocab = Write("vocab.json", kVocab);
  const fs::path merges = Write("merges.txt", "#version: 0.2\na b\na a\n\xC4\xA0 ab\n");
  auto tokenizer = ByteLevelBpeTokenizer::FromVocabAndMerges(vocab, merges);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("aab ab"), (Ids{0, 3, 5}));
}

TEST_F(ByteLevelBpeTokenizerTest, MissingOrBadMergesTxtIsNamed) {
  const fs::path vocab = Write("vocab.json", kVocab);
  auto missing = ByteLevelBpeTokenizer::FromVocabAndMerges(vocab, dir_ / "merges.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("merges.txt"), std::string::npos);

  const fs::path merges = Write("merges.txt", "#version: 0.2\na b\nab\n");
  auto bad = ByteLevelBpeTokenizer::FromVocabAndMerges(vocab, merges);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(merges.string() + ": line 3"), std::string::npos)
      << bad.status();

  auto bad_vocab = ByteLevelBpeTokenizer::FromVocabAndMerges(Write("v.json", "[1, 2]"), merges);
  ASSERT_FALSE(bad_vocab.ok());
  EXPECT_NE(bad_vocab.status().message().find("v.json"), std::string::npos) << bad_vocab.status();
}

}  // namespace
}  // namespace anisoscope::analysis
