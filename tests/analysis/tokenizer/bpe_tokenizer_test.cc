// BpeTokenizer on tiny hand-made tokenizer files: merge order, added tokens,
// normalization, invalid UTF-8, and the errors for bad files.
#include "analysis/tokenizer/bpe_tokenizer.h"

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

class BpeTokenizerTest : public ::testing::Test {
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
  std::unique_ptr<BpeTokenizer> FromJson(const std::string& json) {
    auto tokenizer =
        BpeTokenizer::FromTokenizerJson(Write("tokenizer.json", json), FileGate::Host());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }
  // The error of loading `json`, which must mention every one of `needles`.
  void ExpectJsonError(const std::string& json, std::vector<std::string> needles) {
    auto tokenizer =
        BpeTokenizer::FromTokenizerJson(Write("tokenizer.json", json), FileGate::Host());
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

TEST_F(BpeTokenizerTest, MergesApplyLowestRankFirst) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("aab").value(), (Ids{0, 3}));
  EXPECT_EQ(tokenizer->Encode(" ab").value(), (Ids{5}));
  EXPECT_EQ(tokenizer->Encode("ab ab").value(), (Ids{3, 5}));
  EXPECT_EQ(tokenizer->Encode("").value(), Ids{});
  EXPECT_EQ(tokenizer->vocab_size(), 16);
}

TEST_F(BpeTokenizerTest, AddedTokensSplitLeftmostLongestBeforeTheModel) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("ab   ab").value(), (Ids{3, 9, 3}));
  EXPECT_EQ(tokenizer->Encode("ab     ab").value(), (Ids{3, 9, 8, 3}));
  EXPECT_EQ(tokenizer->Encode("a<s>b").value(), (Ids{0, 7, 1}));
  EXPECT_EQ(tokenizer->TokenId("<s>"), 7);
}

TEST_F(BpeTokenizerTest, NormalizedAddedTokensMatchAfterNfc) {
  auto nfc = FromJson(TokenizerJson());
  ASSERT_NE(nfc, nullptr);
  // U+212B ANGSTROM SIGN and A + U+030A are both U+00C5 after NFC.
  EXPECT_EQ(nfc->Encode("\u212b").value(), (Ids{12}));
  EXPECT_EQ(nfc->Encode("A\u030a").value(), (Ids{12}));
  auto raw = FromJson(TokenizerJson(R"({"type": "ByteLevel"})", "null"));
  ASSERT_NE(raw, nullptr);
  // Without a normalizer the sign stays U+212B, whose bytes are not in this vocabulary.
  EXPECT_EQ(raw->Encode("\u212b").value(), Ids{});
}

TEST_F(BpeTokenizerTest, AddPrefixSpaceAndUseRegexAreHonoured) {
  auto prefixed = FromJson(TokenizerJson(R"({"type": "ByteLevel", "add_prefix_space": true})"));
  ASSERT_NE(prefixed, nullptr);
  EXPECT_EQ(prefixed->Encode("ab").value(), (Ids{5}));
  EXPECT_EQ(prefixed->Encode(" ab").value(), (Ids{5}));
  auto no_regex = FromJson(TokenizerJson(R"({"type": "ByteLevel", "use_regex": false})"));
  ASSERT_NE(no_regex, nullptr);
  // One word: a + b merge, then Ġ + ab.
  EXPECT_EQ(no_regex->Encode("ab ab").value(), (Ids{3, 5}));
  EXPECT_EQ(no_regex->Encode("a ab").value(), (Ids{0, 5}));
}

TEST_F(BpeTokenizerTest, InvalidUtf8IsEncodedAsReplacementCharacter) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("\xff").value(), (Ids{13, 14, 15}));
  EXPECT_EQ(tokenizer->Encode("a\xc3").value(), (Ids{0, 13, 14, 15}));
}

TEST_F(BpeTokenizerTest, ConcurrentEncodesAgree) {
  auto tokenizer = FromJson(TokenizerJson());
  ASSERT_NE(tokenizer, nullptr);
  std::vector<std::thread> threads;
  std::vector<Ids> results(4);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        results[t] = tokenizer->Encode("aab ab  ab" + std::string(i % 7, 'a') + " ab").value();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, results[0]);
}

TEST_F(BpeTokenizerTest, MalformedJsonNamesTheFile) {
  ExpectJsonError("{\"model\": ", {"malformed JSON"});
}

TEST_F(BpeTokenizerTest, MissingVocabOrMergesNamesTheField) {
  ExpectJsonError(
      R"({"model": {"type": "BPE", "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
      {"model.vocab", "missing"});
  ExpectJsonError(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}})",
      {"model.merges", "missing"});
  ExpectJsonError(R"({"pre_tokenizer": {"type": "ByteLevel"}})", {"'model'", "missing"});
}

TEST_F(BpeTokenizerTest, UnsupportedModelNormalizerOrPreTokenizerIsNamed) {
  ExpectJsonError(TokenizerJson(R"({"type": "ByteLevel"})", "null", "WordPiece"),
                  {"model.type", "WordPiece"});
  ExpectJsonError(TokenizerJson(R"({"type": "Whitespace"})"), {"pre_tokenizer.type", "Whitespace"});
  ExpectJsonError(TokenizerJson(R"({"type": "ByteLevel"})", R"({"type": "Lowercase"})"),
                  {"normalizer.type", "Lowercase"});
  ExpectJsonError(TokenizerJson(R"({"type": "ByteLevel"})",
                                R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
                                    {"type": "Replace", "pattern": {"Regex": " +"}, "content": " "}]})"),
                  {"normalizer.normalizers[1].pattern", "regex patterns are not supported"});
}

// Found by tokenizer_json_fuzzer: a "type" that is not a string threw nlohmann's type_error,
// which nothing caught.
TEST_F(BpeTokenizerTest, FieldsOfTheWrongTypeAreNamedNotThrown) {
  std::string json = TokenizerJson();
  json.replace(json.find(R"("type": "BPE")"), 13, R"("type": {})");
  ExpectJsonError(json, {"model.type"});
  ExpectJsonError(TokenizerJson(R"({"type": ["ByteLevel"]})"), {"pre_tokenizer.type"});
  ExpectJsonError(TokenizerJson(R"({"type": "Split", "pattern": {"Regex": " "},
                                    "behavior": 1})"),
                  {"pre_tokenizer.behavior"});
}

TEST_F(BpeTokenizerTest, BadSplitStepsAreNamed) {
  ExpectJsonError(TokenizerJson(R"({"type": "Split", "pattern": {"Regex": "(\\p{L}"},
                                    "behavior": "Isolated", "invert": false})"),
                  {"pre_tokenizer", "does not compile"});
  ExpectJsonError(TokenizerJson(R"({"type": "Split", "pattern": {"Regex": " "},
                                    "behavior": "Removed", "invert": false})"),
                  {"pre_tokenizer.behavior", "Isolated"});
  ExpectJsonError(TokenizerJson(R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"},
                                    {"type": "Split", "pattern": {"Regex": " "},
                                     "behavior": "Isolated"}]})"),
                  {"pre_tokenizer.pretokenizers[1]", "ByteLevel step, which must come last"});
  std::string json = TokenizerJson();
  json.insert(json.size() - 1, R"(, "post_processor": {"type": "RobertaProcessing"})");
  ExpectJsonError(json, {"post_processor.type", "RobertaProcessing"});
}

// Character-level BPE as LLaMA-2 / Mistral: "▁" for spaces, <0xAB> byte fallback, <s>.
constexpr char kMetaVocab[] =
    R"({"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "\u2581a": 5, "ab": 6,
        "<0x0A>": 7, "<0xC3>": 8, "<0xA9>": 9})";
constexpr char kLegacyNormalizer[] = R"({"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";

std::string MetaTokenizerJson(const std::string& normalizer, const std::string& pre_tokenizer,
                              bool byte_fallback) {
  return std::string(R"({"added_tokens": [{"id": 1, "content": "<s>", "special": true,
                                           "normalized": false}],
      "normalizer": )") +
         normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(,
      "post_processor": {"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}}],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
      "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": )" +
         (byte_fallback ? "true" : "false") + R"(, "vocab": )" + kMetaVocab +
         R"(, "merges": ["\u2581 a", "a b"]}})";
}

TEST_F(BpeTokenizerTest, MissingCharactersFallBackToBytes) {
  auto tokenizer = FromJson(MetaTokenizerJson(kLegacyNormalizer, "null", true));
  ASSERT_NE(tokenizer, nullptr);
  // "▁a▁b\né": ▁a merges; \n and é (C3 A9) are byte tokens.
  EXPECT_EQ(tokenizer->Encode("a b\n\u00e9").value(), (Ids{5, 2, 4, 7, 8, 9}));
  EXPECT_EQ(tokenizer->prefix_ids(), Ids{1});
  EXPECT_TRUE(tokenizer->suffix_ids().empty());
}

TEST_F(BpeTokenizerTest, UnknownCharactersFuseIntoOneUnkWithoutByteFallback) {
  auto tokenizer = FromJson(MetaTokenizerJson(kLegacyNormalizer, "null", false));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("xyz a").value(), (Ids{2, 0, 5}));
}

TEST_F(BpeTokenizerTest, MetaspacePrependsOnlyAtTheStartOfTheTextWhenFirst) {
  auto tokenizer = FromJson(MetaTokenizerJson(
      "null", R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                  "split": true})",
      true));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("a b").value(), (Ids{5, 2, 4}));
  // After an added token the text does not start: no "▁" before "ab".
  EXPECT_EQ(tokenizer->Encode("<s>ab").value(), (Ids{1, 6}));
}

TEST_F(BpeTokenizerTest, MergeOfUnknownTokensIsAnError) {
  std::string json = TokenizerJson();
  json.replace(json.find("\"a a\""), 5, "\"a z\"");
  ExpectJsonError(json, {"model.merges", "merge 1", "\"z\""});
}

TEST_F(BpeTokenizerTest, UnsupportedAddedTokenOptionIsNamed) {
  std::string json = TokenizerJson();
  json.replace(json.find("\"special\": true"), 15, "\"special\": true, \"lstrip\": true");
  ExpectJsonError(json, {"added_tokens[0].lstrip"});
}

TEST_F(BpeTokenizerTest, MissingTokenizerJsonIsNotFound) {
  auto tokenizer =
      BpeTokenizer::FromTokenizerJson(dir_ / "absent" / "tokenizer.json", FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("absent/tokenizer.json"), std::string::npos);
}

TEST_F(BpeTokenizerTest, VocabAndMergesFilesLoadLikeGpt2) {
  const fs::path vocab = Write("vocab.json", kVocab);
  const fs::path merges = Write("merges.txt", "#version: 0.2\na b\na a\n\xC4\xA0 ab\n");
  auto tokenizer = BpeTokenizer::FromVocabAndMerges(vocab, merges, FileGate::Host());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("aab ab").value(), (Ids{0, 3, 5}));
}

TEST_F(BpeTokenizerTest, MissingOrBadMergesTxtIsNamed) {
  const fs::path vocab = Write("vocab.json", kVocab);
  auto missing = BpeTokenizer::FromVocabAndMerges(vocab, dir_ / "merges.txt", FileGate::Host());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("merges.txt"), std::string::npos);

  const fs::path merges = Write("merges.txt", "#version: 0.2\na b\nab\n");
  auto bad = BpeTokenizer::FromVocabAndMerges(vocab, merges, FileGate::Host());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(merges.string() + ": line 3"), std::string::npos)
      << bad.status();

  auto bad_vocab =
      BpeTokenizer::FromVocabAndMerges(Write("v.json", "[1, 2]"), merges, FileGate::Host());
  ASSERT_FALSE(bad_vocab.ok());
  EXPECT_NE(bad_vocab.status().message().find("v.json"), std::string::npos) << bad_vocab.status();
}

}  // namespace
}  // namespace anisoscope::analysis
