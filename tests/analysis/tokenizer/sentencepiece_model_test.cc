// A SentencePiece tokenizer.model converted to BPE (sentencepiece_model.h) against
// libsentencepiece itself on LLaMA's model (tests/data/tokenizers/llama): every golden text
// and every line of WikiText-2's test split give the same ids. And the errors for files that
// are not BPE SentencePiece models. Needs $ANISOSCOPE_SHARED_DATA for WikiText.
#include "analysis/tokenizer/sentencepiece_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/analysis/tokenizer/sentencepiece_library.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

const fs::path kLlamaModel = fs::path(ANISOSCOPE_REPO_TOKENIZERS) / "llama" / "tokenizer.model";

class SentencePieceConversionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    library_ = spm_reference::SentencePieceLibrary::Load(kLlamaModel.string(), &error);
    ASSERT_NE(library_, nullptr) << error;
    auto converted = BpeTokenizer::FromSentencePieceModel(kLlamaModel, FileGate::Host());
    ASSERT_TRUE(converted.ok()) << converted.status();
    converted_ = *std::move(converted);
  }

  std::unique_ptr<spm_reference::SentencePieceLibrary> library_;
  std::unique_ptr<BpeTokenizer> converted_;
};

TEST_F(SentencePieceConversionTest, VocabularyAndSpecialIdsAreTheModels) {
  EXPECT_EQ(converted_->vocab_size(), library_->piece_count());
  EXPECT_EQ(converted_->prefix_ids(), std::vector<int64_t>{library_->bos_id()});
  EXPECT_EQ(converted_->TokenId("</s>"), library_->eos_id());
  EXPECT_EQ(converted_->TokenId("<0x0A>"), library_->PieceId("<0x0A>"));
}

TEST_F(SentencePieceConversionTest, EveryGoldenTextMatchesLibsentencepiece) {
  std::ifstream in(fs::path(ANISOSCOPE_TOKENIZER_TESTDATA) / "llama_golden.json");
  const nlohmann::json cases = nlohmann::json::parse(in).at("cases");
  ASSERT_GE(cases.size(), 100u);
  for (const nlohmann::json& golden : cases) {
    const std::string text = golden.at("text");
    EXPECT_EQ(converted_->Encode(text).value(), library_->Encode(text)) << golden.at("name");
  }
}

TEST_F(SentencePieceConversionTest, EveryWikitextLineMatchesLibsentencepiece) {
  const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
  if (shared == nullptr || *shared == '\0') GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA is not set";
  std::ifstream in(fs::path(shared) / "corpora" / "wikitext-2" / "wiki.test.raw");
  ASSERT_TRUE(in) << "wikitext-2 is missing under ANISOSCOPE_SHARED_DATA";
  int lines = 0;
  int differing = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    if (converted_->Encode(line).value() != library_->Encode(line) && ++differing <= 3) {
      ADD_FAILURE() << "line " << lines + 1 << " differs: " << line;
    }
  }
  EXPECT_GT(lines, 4000);
  EXPECT_EQ(differing, 0);
}

// Protobuf wire format: a length-delimited field, a varint field.
std::string Bytes(int field, const std::string& payload) {
  return std::string(1, static_cast<char>(field << 3 | 2)) +
         std::string(1, static_cast<char>(payload.size())) + payload;
}
std::string Varint(int field, int value) {
  return std::string(1, static_cast<char>(field << 3)) + std::string(1, static_cast<char>(value));
}

class SentencePieceErrorsTest : public ::testing::Test {
 protected:
  // The error of loading `contents` as a tokenizer.model, which must mention `needle`.
  void ExpectError(const std::string& contents, const std::string& needle) {
    const fs::path file =
        fs::temp_directory_path() / ("sentencepiece_" + std::to_string(::getpid()) + ".model");
    std::ofstream(file, std::ios::binary) << contents;
    auto tokenizer = BpeTokenizer::FromSentencePieceModel(file, FileGate::Host());
    fs::remove(file);
    ASSERT_FALSE(tokenizer.ok());
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : {file.string(), needle}) {
      EXPECT_NE(tokenizer.status().message().find(part), std::string::npos)
          << tokenizer.status() << " lacks " << part;
    }
  }
};

TEST_F(SentencePieceErrorsTest, MissingModelIsNotFound) {
  auto tokenizer =
      BpeTokenizer::FromSentencePieceModel("/nonexistent/tokenizer.model", FileGate::Host());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("/nonexistent/tokenizer.model"), std::string::npos);
}

TEST_F(SentencePieceErrorsTest, BytesThatAreNotAModelAreNamed) {
  ExpectError("{\"this is\": \"json, not a ModelProto\"}", "not a SentencePiece model");
  ExpectError(Bytes(1, Bytes(1, "a")).substr(0, 3), "malformed protobuf");
}

TEST_F(SentencePieceErrorsTest, UnigramAndNormalizingModelsAreRefusedByField) {
  const std::string piece = Bytes(1, Bytes(1, "a"));
  ExpectError(piece + Bytes(2, Varint(3, 1)), "trainer_spec.model_type");
  ExpectError(piece + Bytes(2, Varint(3, 2)) + Bytes(3, Bytes(1, "nmt_nfkc")),
              "normalizer_spec.name");
  ExpectError(piece + Bytes(2, Varint(3, 2)) + Bytes(3, Bytes(1, "identity")),
              "normalizer_spec.remove_extra_whitespaces");
  ExpectError(piece + Bytes(2, Varint(3, 2)) + Bytes(3, Bytes(1, "identity") + Varint(4, 0)),
              "trainer_spec.bos_id");
}

}  // namespace
}  // namespace anisoscope::analysis
