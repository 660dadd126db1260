// LoadCheckpointTokenizer: which tokenizer a checkpoint directory's files select, on temp
// directories with symlinks to the shared tokenizer files (those tests skip without
// $ANISOSCOPE_SHARED_DATA) or tiny hand-made files.
#include "analysis/probe/checkpoint_tokenizer.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/tokenizer/bpe_tokenizer.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

class CheckpointTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("checkpoint_tokenizer_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    const char* shared = std::getenv("ANISOSCOPE_SHARED_DATA");
    if (shared != nullptr && *shared != '\0') tokenizers_ = fs::path(shared) / "tokenizers";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Links shared tokenizers/<family>/<name> into the checkpoint dir; false if absent.
  bool Link(const std::string& family, const std::string& name) {
    const fs::path target = tokenizers_ / family / name;
    if (tokenizers_.empty() || !fs::exists(target)) return false;
    fs::create_symlink(target, dir_ / name);
    return true;
  }
  // Links tests/data/tokenizers/<family>/<name> into the checkpoint dir.
  void LinkRepo(const std::string& family, const std::string& name) {
    fs::create_symlink(fs::path(ANISOSCOPE_REPO_TOKENIZERS) / family / name, dir_ / name);
  }
  void Write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
  }

  fs::path dir_;
  fs::path tokenizers_;
};

TEST_F(CheckpointTokenizerTest, VocabTxtWinsAndFramesWithClsSep) {
  if (!Link("bert-base-uncased", "vocab.txt") || !Link("bert-base-uncased", "tokenizer.json")) {
    GTEST_SKIP() << "ANISOSCOPE_SHARED_DATA/tokenizers/bert-base-uncased is missing";
  }
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_NE(dynamic_cast<WordPieceTokenizer*>(chosen->tokenizer.get()), nullptr);
  EXPECT_EQ(chosen->framing.prefix, Ids{101});
  EXPECT_EQ(chosen->framing.suffix, Ids{102});
  EXPECT_EQ(chosen->tokenizer->Encode("Hello").value(), Ids{7592});
  EXPECT_NE(chosen->description.find("WordPiece"), std::string::npos);
}

TEST_F(CheckpointTokenizerTest, CasingComesFromTokenizerConfigThenConfig) {
  Write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nHello\n");
  absl::StatusOr<CheckpointTokenizer> uncased = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(uncased.ok()) << uncased.status();
  EXPECT_EQ(uncased->tokenizer->Encode("Hello").value(), Ids{4});
  absl::StatusOr<CheckpointTokenizer> cased =
      LoadCheckpointTokenizer(dir_, nlohmann::json{{"do_lower_case", false}}, FileGate::Host());
  ASSERT_TRUE(cased.ok()) << cased.status();
  EXPECT_EQ(cased->tokenizer->Encode("Hello").value(), Ids{5});
  Write("tokenizer_config.json", R"({"do_lower_case": true})");
  absl::StatusOr<CheckpointTokenizer> overridden =
      LoadCheckpointTokenizer(dir_, nlohmann::json{{"do_lower_case", false}}, FileGate::Host());
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->tokenizer->Encode("Hello").value(), Ids{4});
}

TEST_F(CheckpointTokenizerTest, BpeTokenizerJsonIsByteLevelBpeWithoutFraming) {
  if (!Link("pythia", "tokenizer.json")) GTEST_SKIP() << "pythia tokenizer.json is missing";
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->framing.size(), 0);
  EXPECT_EQ(chosen->tokenizer->vocab_size(), 50277);
  // transformers.js ids for Pythia (tests/analysis/tokenizer/testdata/pythia_golden.json).
  EXPECT_EQ(chosen->tokenizer->Encode(" = Robert Boulter = ").value(),
            (Ids{426, 6911, 378, 3941, 350, 426, 209}));
  EXPECT_NE(chosen->description.find("tokenizer.json"), std::string::npos);
}

// LLaMA-2's ids of "hello world" (tests/analysis/tokenizer/testdata/llama_golden.json).
const Ids kLlamaHelloWorld = {22172, 3186};

TEST_F(CheckpointTokenizerTest, TokenizerModelIsSentencePieceWithBos) {
  LinkRepo("llama", "tokenizer.model");
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_NE(dynamic_cast<BpeTokenizer*>(chosen->tokenizer.get()), nullptr);
  EXPECT_EQ(chosen->tokenizer->Encode("hello world").value(), kLlamaHelloWorld);
  EXPECT_EQ(chosen->framing.prefix, Ids{1});
  EXPECT_TRUE(chosen->framing.suffix.empty());
  EXPECT_NE(chosen->description.find("SentencePiece"), std::string::npos);
}

TEST_F(CheckpointTokenizerTest, TokenizerConfigDecidesBosAndEos) {
  LinkRepo("llama", "tokenizer.model");
  Write("tokenizer_config.json",
        R"({"add_bos_token": false, "add_eos_token": true, "eos_token": {"content": "</s>"}})");
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_TRUE(chosen->framing.prefix.empty());
  EXPECT_EQ(chosen->framing.suffix, Ids{2});
}

TEST_F(CheckpointTokenizerTest, AddedSpecialTokenThatTheTokenizerLacksIsNamed) {
  LinkRepo("llama", "tokenizer.model");
  Write("tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<|begin_of_text|>"})");
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string needle : {"tokenizer_config.json", "add_bos_token", "<|begin_of_text|>"}) {
    EXPECT_NE(chosen.status().message().find(needle), std::string::npos) << chosen.status();
  }
}

// Mistral's tokenizer.json declares <s> in its TemplateProcessing post-processor; it wins
// over a tokenizer.model beside it, as in AutoTokenizer.
TEST_F(CheckpointTokenizerTest, TokenizerJsonWinsOverTokenizerModelAndFramesAsDeclared) {
  LinkRepo("mistral", "tokenizer.json");
  LinkRepo("llama", "tokenizer.model");
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_NE(dynamic_cast<BpeTokenizer*>(chosen->tokenizer.get()), nullptr);
  EXPECT_EQ(chosen->framing.prefix, Ids{1});
  EXPECT_NE(chosen->description.find("tokenizer.json"), std::string::npos);
}

TEST_F(CheckpointTokenizerTest, VocabJsonAndMergesTxtAreGpt2) {
  if (!Link("gpt2", "vocab.json") || !Link("gpt2", "merges.txt")) {
    GTEST_SKIP() << "gpt2 vocab.json + merges.txt are missing";
  }
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->framing.size(), 0);
  EXPECT_EQ(chosen->tokenizer->vocab_size(), 50257);
  EXPECT_EQ(chosen->tokenizer->Encode(" = Robert Boulter = ").value(),
            (Ids{796, 5199, 347, 2852, 353, 796, 220}));
}

TEST_F(CheckpointTokenizerTest, NonBpeTokenizerJsonFallsBackToVocabJsonAndMerges) {
  if (!Link("bert-base-uncased", "tokenizer.json") || !Link("gpt2", "vocab.json") ||
      !Link("gpt2", "merges.txt")) {
    GTEST_SKIP() << "shared tokenizer files are missing";
  }
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->tokenizer->vocab_size(), 50257);
}

TEST_F(CheckpointTokenizerTest, PythiaTextProbeWindowsCarryNoSpecialTokens) {
  if (!Link("pythia", "tokenizer.json") || tokenizers_.empty()) {
    GTEST_SKIP() << "pythia tokenizer.json is missing";
  }
  const fs::path text = tokenizers_.parent_path() / "corpora" / "wikitext-2" / "wiki.test.raw";
  if (!fs::exists(text)) GTEST_SKIP() << text << " is missing";
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  absl::StatusOr<Probe> probe = BuildTextProbe(text, *chosen->tokenizer, chosen->framing,
                                               TextMode::kWindows, 4, 16, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 4u);
  for (const auto& sample : probe->samples) EXPECT_EQ(sample.size(), 16u);
  // The whole text's first transformers.js ids (testdata/wikitext_windows_golden.json),
  // newline tokens included.
  EXPECT_EQ(probe->samples[0], (Ids{535, 426, 6911, 378, 3941, 350, 426, 209, 8863, 6911, 378, 3941,
                                    350, 310, 271, 4383}));
}

TEST_F(CheckpointTokenizerTest, NoTokenizerFilesIsNotFoundNamingDirAndFiles) {
  absl::StatusOr<CheckpointTokenizer> chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kNotFound);
  for (const std::string& needle :
       {dir_.string(), std::string("vocab.txt"), std::string("tokenizer.json"),
        std::string("vocab.json + merges.txt")}) {
    EXPECT_NE(chosen.status().message().find(needle), std::string::npos) << chosen.status();
  }
  Write("vocab.json", R"({"a": 0})");
  chosen = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find("found only vocab.json"), std::string::npos)
      << chosen.status();
}

TEST_F(CheckpointTokenizerTest, UnusableTokenizerJsonIsNamed) {
  Write("tokenizer.json", R"({"model": {"type": "Unigram"}})");
  absl::StatusOr<CheckpointTokenizer> other = LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("model.type 'Unigram'"), std::string::npos)
      << other.status();
  Write("tokenizer.json", "{ not json");
  absl::StatusOr<CheckpointTokenizer> malformed =
      LoadCheckpointTokenizer(dir_, {}, FileGate::Host());
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find((dir_ / "tokenizer.json").string()),
            std::string::npos);
}

}  // namespace
}  // namespace anisoscope::analysis
