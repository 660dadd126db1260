// Bad input reaching the engine fails with a status naming the file and field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "analysis/extractor/extractor.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

class ExtractorErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* fixtures = std::getenv("ANISOSCOPE_FIXTURES");
    source_ = fs::path(fixtures ? fixtures : "fixtures") / "bert_run" / "bin" / "step_0";
    ASSERT_TRUE(fs::exists(source_)) << "fixture bert_run missing at " << source_;
    dir_ = fs::temp_directory_path() /
           (std::string("extractor_errors_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(source_, dir_ / "ckpt");
    auto extractor = CreateTorchExtractor(TorchExtractorOptions());
    ASSERT_TRUE(extractor.ok()) << extractor.status();
    extractor_ = std::move(*extractor);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path WriteProbe(const std::string& lines) {
    const fs::path path = dir_ / "probe.jsonl";
    std::ofstream(path) << lines;
    return path;
  }

  absl::Status ExtractWith(const fs::path& probe_file) {
    ProbeSpec spec;
    spec.file = probe_file;
    auto probe = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
    if (!probe.ok()) return probe.status();
    return extractor_->Extract(dir_ / "ckpt", *probe, {}, FileGate::Host()).status();
  }

  fs::path source_;
  fs::path dir_;
  std::unique_ptr<Extractor> extractor_;
};

TEST_F(ExtractorErrorsTest, TokenIdOutOfVocabularyNamesSampleAndConfig) {
  const absl::Status status = ExtractWith(WriteProbe("[2, 5, 3]\n[2, 999999, 3]\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("sample 1 token 1 has id 999999"), std::string::npos) << status;
  EXPECT_NE(status.message().find("config.json"), std::string::npos) << status;
}

TEST_F(ExtractorErrorsTest, SeqLenBeyondModelMaximumIsRefused) {
  ProbeSpec spec;
  spec.file = WriteProbe("[2, 5, 3]\n");
  spec.seq_len = 100000;
  auto probe = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(probe.status().message().find("max_position_embeddings"), std::string::npos);
}

// Mistral's sliding window, shorter than max_position_embeddings, is the longest probe; the
// refusals name it, not max_position_embeddings: BuildProbe's of a longer --seq-len, and
// Extract's of a probe built longer (here against the checkpoint without the window).
TEST_F(ExtractorErrorsTest, ProbeLongerThanASlidingWindowNamesTheWindow) {
  const char* fixtures = std::getenv("ANISOSCOPE_FIXTURES");
  const fs::path llama = fs::path(fixtures ? fixtures : "fixtures") / "causal_runs" / "llama" /
                         "step100";
  ASSERT_TRUE(fs::exists(llama)) << "fixture causal_runs missing at " << llama;
  fs::remove_all(dir_ / "ckpt");
  fs::copy(llama, dir_ / "ckpt");
  ProbeSpec spec;
  spec.file = WriteProbe("[2, 5, 3, 7, 9, 11]\n");
  const auto long_probe = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  ASSERT_TRUE(long_probe.ok()) << long_probe.status();
  ASSERT_EQ(long_probe->samples[0].size(), 6u);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir_ / "ckpt" / "config.json"));
  config["model_type"] = "mistral";
  config["architectures"] = {"MistralForCausalLM"};
  config["sliding_window"] = 4;
  std::ofstream(dir_ / "ckpt" / "config.json") << config.dump();

  spec.seq_len = 6;
  const absl::Status built = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host()).status();
  EXPECT_EQ(built.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(built.message().find("--seq-len 6 exceeds"), std::string::npos) << built;
  EXPECT_NE(built.message().find("(sliding_window 4)"), std::string::npos) << built;
  const absl::Status status =
      extractor_->Extract(dir_ / "ckpt", *long_probe, {}, FileGate::Host()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("(sliding_window 4)"), std::string::npos) << status;
}

TEST_F(ExtractorErrorsTest, TruncatedWeightsNameTheFile) {
  const fs::path weights = dir_ / "ckpt" / "pytorch_model.bin";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  const absl::Status status = ExtractWith(WriteProbe("[2, 5, 3]\n"));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("pytorch_model.bin"), std::string::npos) << status;
}

TEST_F(ExtractorErrorsTest, WrongShapeNamesTensorFileAndConfig) {
  std::ifstream in(dir_ / "ckpt" / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string from = "\"intermediate_size\": 256";
  ASSERT_NE(config.find(from), std::string::npos) << config;
  config.replace(config.find(from), from.size(), "\"intermediate_size\": 128");
  std::ofstream(dir_ / "ckpt" / "config.json") << config;
  const absl::Status status = ExtractWith(WriteProbe("[2, 5, 3]\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("intermediate.dense.weight' in "), std::string::npos) << status;
  EXPECT_NE(status.message().find("has shape [256, 64], expected [128, 64]"), std::string::npos)
      << status;
}

TEST_F(ExtractorErrorsTest, UnknownFamilyListsSupportedOnes) {
  std::ofstream(dir_ / "ckpt" / "config.json")
      << R"({"model_type": "mamba", "max_position_embeddings": 64})";
  const absl::Status status = ExtractWith(WriteProbe("[2, 5, 3]\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'mamba' is not supported; supported families: bert"),
            std::string::npos)
      << status;
}

TEST_F(ExtractorErrorsTest, MissingConfigFieldIsNamed) {
  std::ofstream(dir_ / "ckpt" / "config.json")
      << R"({"model_type": "bert", "max_position_embeddings": 64, "vocab_size": 10})";
  const absl::Status status = ExtractWith(WriteProbe("[2, 5, 3]\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("field 'hidden_size' is missing"), std::string::npos) << status;
}

TEST(ExtractorOptionsTest, Float16OnTheCpuIsRefusedUpFrontWhereLibTorchCannotRunIt) {
  TorchExtractorOptions options;
  options.dtype = "float16";
  const auto extractor = CreateTorchExtractor(options);
  if (extractor.ok()) GTEST_SKIP() << "this LibTorch runs float16 LayerNorm on the CPU";
  EXPECT_EQ(extractor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(extractor.status().message().find("use bfloat16 or float32"), std::string::npos)
      << extractor.status();
}

TEST(ExtractorOptionsTest, BadDeviceAndDtypeAreRefused) {
  TorchExtractorOptions options;
  options.device = "tpu:3";
  EXPECT_EQ(CreateTorchExtractor(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.device = "cpu";
  options.dtype = "int8";
  EXPECT_EQ(CreateTorchExtractor(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope::analysis

namespace anisoscope::analysis {
namespace {

class ExtractorTextProbeTest : public ExtractorErrorsTest {};

TEST_F(ExtractorTextProbeTest, TextWindowsUseTheCheckpointVocabulary) {
  const fs::path text = dir_ / "probe.txt";
  std::ofstream(text) << "the license grants you the right to copy the work\n\n"
                         "and to distribute copies of the software under these terms\n";
  ProbeSpec spec;
  spec.source = ProbeSource::kText;
  spec.file = text;
  spec.samples = 2;
  spec.seq_len = 8;
  auto probe = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->samples.size(), 2u);
  for (const std::vector<int64_t>& sample : probe->samples) {
    ASSERT_EQ(sample.size(), 8u);
    EXPECT_EQ(sample.front(), 2);  // the fixture vocabulary's [CLS]
    EXPECT_EQ(sample.back(), 3);   // [SEP]
    for (size_t t = 1; t + 1 < sample.size(); ++t) EXPECT_NE(sample[t], 1) << "[UNK]";
  }
  EXPECT_TRUE(extractor_->Extract(dir_ / "ckpt", *probe, {}, FileGate::Host()).ok());
}

TEST_F(ExtractorTextProbeTest, TokenizerConfigCanMakeTheTokenizerCased) {
  const fs::path text = dir_ / "probe.txt";
  std::ofstream(text) << "LICENSE\n";
  ProbeSpec spec;
  spec.source = ProbeSource::kText;
  spec.file = text;
  spec.mode = TextMode::kLines;
  spec.seq_len = 8;
  auto uncased = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  ASSERT_TRUE(uncased.ok()) << uncased.status();
  EXPECT_NE(uncased->samples[0][1], 1);  // "license" is in the lower-case vocabulary
  std::ofstream(dir_ / "ckpt" / "tokenizer_config.json") << R"({"do_lower_case": false})";
  auto cased = extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  ASSERT_TRUE(cased.ok()) << cased.status();
  EXPECT_EQ(cased->samples[0][1], 1);  // "LICENSE" is not: [UNK]
}

}  // namespace
}  // namespace anisoscope::analysis
