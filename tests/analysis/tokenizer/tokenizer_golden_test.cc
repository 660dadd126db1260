// BpeTokenizer against goldens made by transformers.js (tests/fixtures/tokenizer_goldens/
// generate.mjs): Pythia (tokenizer.json) and GPT-2 (vocab.json + merges.txt) from
// $ANISOSCOPE_SHARED_DATA/tokenizers; Mistral (byte fallback, Metaspace normalizer), Qwen2.5
// (Split regex + ByteLevel) and LLaMA's SentencePiece tokenizer.model (the golden is
// transformers.js on the conversion generate.mjs makes of it) from tests/data/tokenizers.
// Needs $ANISOSCOPE_SHARED_DATA (the corpus).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

nlohmann::json ReadGoldens(const std::string& name) {
  std::ifstream in(fs::path(ANISOSCOPE_TOKENIZER_TESTDATA) / name);
  return nlohmann::json::parse(in);
}

// Which tokenizer a test instance checks.
struct GoldenParam {
  const char* name;
  const char* golden_file;
  int64_t vocab_size;
  // A special token and its id.
  const char* special_token;
  int64_t special_token_id;
  // Under tests/data/tokenizers rather than the shared data.
  bool in_repo;
};

class TokenizerGoldenTest : public ::testing::TestWithParam<GoldenParam> {
 protected:
  void SetUp() override {
    const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
    if (shared == nullptr || *shared == '\0') {
      GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA is not set (run through ctest, or point it at "
                      "../shared/data); skipping tokenizer goldens";
    }
    shared_ = shared;
    const fs::path dir = (GetParam().in_repo ? fs::path(ANISOSCOPE_REPO_TOKENIZERS)
                                             : shared_ / "tokenizers") /
                         GetParam().name;
    const std::string name = GetParam().name;
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
        name == "gpt2" ? BpeTokenizer::FromVocabAndMerges(dir / "vocab.json", dir / "merges.txt",
                                                          FileGate::Host())
        : name == "llama"
            ? BpeTokenizer::FromSentencePieceModel(dir / "tokenizer.model", FileGate::Host())
            : BpeTokenizer::FromTokenizerJson(dir / "tokenizer.json", FileGate::Host());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  fs::path shared_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
};

TEST_P(TokenizerGoldenTest, VocabSizeAndSpecialTokenId) {
  EXPECT_EQ(tokenizer_->vocab_size(), GetParam().vocab_size);
  EXPECT_EQ(tokenizer_->TokenId(GetParam().special_token), GetParam().special_token_id);
}

// The special tokens the tokenizer declares (LLaMA and Mistral <s>; none for the others)
// around the text, as transformers.js encodes with add_special_tokens.
TEST_P(TokenizerGoldenTest, FramingMatchesTransformersJsWithSpecialTokens) {
  const nlohmann::json golden = ReadGoldens(GetParam().golden_file).at("with_special_tokens");
  std::vector<int64_t> ids = tokenizer_->prefix_ids();
  const std::string text = golden.at("text").get<std::string>();
  for (const int64_t id : std::vector<int64_t>(tokenizer_->Encode(text).value())) {
    ids.push_back(id);
  }
  ids.insert(ids.end(), tokenizer_->suffix_ids().begin(), tokenizer_->suffix_ids().end());
  EXPECT_EQ(ids, golden.at("ids").get<std::vector<int64_t>>());
}

TEST_P(TokenizerGoldenTest, EveryGoldenCaseMatchesTransformersJs) {
  const nlohmann::json goldens = ReadGoldens(GetParam().golden_file);
  const nlohmann::json& cases = goldens.at("cases");
  ASSERT_GE(cases.size(), 100u) << GetParam().golden_file;
  for (const nlohmann::json& golden : cases) {
    const std::string name = golden.at("name");
    const std::string text = golden.at("text");
    EXPECT_EQ(tokenizer_->Encode(text).value(), golden.at("ids").get<std::vector<int64_t>>())
        << name;
  }
}

TEST_P(TokenizerGoldenTest, WholeWikitextTestSetMatchesTransformersJsDigest) {
  const nlohmann::json corpus = ReadGoldens(GetParam().golden_file).at("corpus");
  std::ifstream in(shared_ / corpus.at("file").get<std::string>(), std::ios::binary);
  if (!in) GTEST_SKIP() << corpus.at("file") << " is missing under ANISOSCOPE_SHARED_DATA";
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  // FNV-1a 64 over the ids of every '\n' line, each as 8 little-endian bytes.
  const auto start = std::chrono::steady_clock::now();
  uint64_t hash = 14695981039346656037ULL;
  int64_t tokens = 0;
  for (const std::string& line : lines) {
    for (const int64_t id : std::vector<int64_t>(tokenizer_->Encode(line).value())) {
      ++tokens;
      for (int byte = 0; byte < 8; ++byte) {
        hash ^= (static_cast<uint64_t>(id) >> (8 * byte)) & 0xFF;
        hash *= 1099511628211ULL;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing ] %s: %lld tokens of wiki.test.raw in %.3f s\n", GetParam().name,
              static_cast<long long>(tokens), seconds);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  // getline does not count the empty piece after a final '\n'; JS split does.
  EXPECT_LE(corpus.at("lines").get<int64_t>() - static_cast<int64_t>(lines.size()), 1);
  EXPECT_EQ(tokens, corpus.at("tokens").get<int64_t>());
  EXPECT_EQ(std::string(hex), corpus.at("fnv1a64").get<std::string>());
  // Well under a second even in a loaded CI; the budget catches a pathological slowdown.
  EXPECT_LT(seconds, 5.0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerGoldenTest,
                         ::testing::Values(
                             GoldenParam{"pythia", "pythia_golden.json", 50277, "<|endoftext|>", 0,
                                         false},
                             GoldenParam{"gpt2", "gpt2_golden.json", 50257, "<|endoftext|>", 50256,
                                         false},
                             GoldenParam{"mistral", "mistral_golden.json", 32000, "</s>", 2, true},
                             GoldenParam{"qwen2_5", "qwen2_5_golden.json", 151665, "<|endoftext|>",
                                         151643, true},
                             GoldenParam{"llama", "llama_golden.json", 32000, "<s>", 1, true}),
                         [](const ::testing::TestParamInfo<GoldenParam>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace anisoscope::analysis
