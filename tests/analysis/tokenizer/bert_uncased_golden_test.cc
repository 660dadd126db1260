// WordPieceTokenizer against bert-base-uncased goldens made by transformers.js
// (tests/fixtures/tokenizer_goldens/generate.mjs). Needs $ANISOSCOPE_SHARED_DATA.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

fs::path GoldenFile() {
  return fs::path(ANISOSCOPE_TOKENIZER_TESTDATA) / "bert_uncased_golden.json";
}

nlohmann::json ReadGoldens() {
  std::ifstream in(GoldenFile());
  return nlohmann::json::parse(in);
}

class BertUncasedGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
    if (shared == nullptr || *shared == '\0') {
      GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA is not set (run through ctest, or point it at "
                      "../shared/data); skipping bert-base-uncased goldens";
    }
    shared_ = shared;
    const fs::path vocab = shared_ / "tokenizers" / "bert-base-uncased" / "vocab.txt";
    if (!fs::exists(vocab)) {
      GTEST_SKIP() << vocab << " is missing; skipping bert-base-uncased goldens";
    }
    auto tokenizer = WordPieceTokenizer::Create(vocab, {}, FileGate::Host());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  fs::path shared_;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

TEST_F(BertUncasedGoldenTest, SpecialIdsAndVocabSizeAreBertBaseUncased) {
  EXPECT_EQ(tokenizer_->vocab_size(), 30522);
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_EQ(tokenizer_->unk_id(), 100);
  EXPECT_EQ(tokenizer_->cls_id(), 101);
  EXPECT_EQ(tokenizer_->sep_id(), 102);
  EXPECT_EQ(tokenizer_->Encode("hello").value(), (std::vector<int64_t>{7592}));
}

TEST_F(BertUncasedGoldenTest, EveryGoldenCaseMatchesTransformersJs) {
  const nlohmann::json goldens = ReadGoldens();
  const nlohmann::json& cases = goldens.at("cases");
  ASSERT_GE(cases.size(), 90u) << GoldenFile();
  for (const nlohmann::json& golden : cases) {
    const std::string name = golden.at("name");
    const std::string text = golden.at("text");
    EXPECT_EQ(tokenizer_->Encode(text).value(), golden.at("ids").get<std::vector<int64_t>>())
        << name;
    EXPECT_EQ(tokenizer_->Tokenize(text), golden.at("tokens").get<std::vector<std::string>>())
        << name;
  }
}

TEST_F(BertUncasedGoldenTest, WholeWikitextTestSetMatchesTransformersJsDigest) {
  const nlohmann::json corpus = ReadGoldens().at("corpus");
  std::ifstream in(shared_ / corpus.at("file").get<std::string>(), std::ios::binary);
  if (!in) GTEST_SKIP() << corpus.at("file") << " is missing under ANISOSCOPE_SHARED_DATA";
  // FNV-1a 64 over the ids of every '\n' line, each as 8 little-endian bytes.
  uint64_t hash = 14695981039346656037ULL;
  int64_t tokens = 0;
  int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++lines;
    for (const int64_t id : std::vector<int64_t>(tokenizer_->Encode(line).value())) {
      ++tokens;
      for (int byte = 0; byte < 8; ++byte) {
        hash ^= (static_cast<uint64_t>(id) >> (8 * byte)) & 0xFF;
        hash *= 1099511628211ULL;
      }
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  // getline does not count the empty piece after a final '\n'; JS split does.
  EXPECT_LE(corpus.at("lines").get<int64_t>() - lines, 1);
  EXPECT_EQ(tokens, corpus.at("tokens").get<int64_t>());
  EXPECT_EQ(std::string(hex), corpus.at("fnv1a64").get<std::string>());
}

// Cases where transformers.js departs from HF's slow BertTokenizer, which we follow.
TEST_F(BertUncasedGoldenTest, SupplementaryCjkIsIsolatedLikeSlowBertTokenizer) {
  EXPECT_EQ(tokenizer_->Encode("a\U00020000b").value(), (std::vector<int64_t>{1037, 100, 1038}));
}

TEST_F(BertUncasedGoldenTest, UnassignedCodePointsAreDroppedLikeSlowBertTokenizer) {
  EXPECT_EQ(tokenizer_->Encode("hel\u0378lo").value(), (std::vector<int64_t>{7592}));
}

TEST_F(BertUncasedGoldenTest, InvalidUtf8IsDropped) {
  EXPECT_EQ(tokenizer_->Encode("hel\xfflo wor\xc3ld").value(), (std::vector<int64_t>{7592, 2088}));
}

}  // namespace
}  // namespace anisoscope::analysis
