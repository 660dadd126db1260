// BuildProbe's sample length, decided from config.json alone (these checkpoint directories
// hold no weights): without --seq-len, the smaller of kDefaultSeqLen and the model's maximum
// as the family's config reader says it (a sliding window where one is shorter); a longer
// --seq-len is refused naming the key that bounds it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/extractor/extractor.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

// Mistral-7B-v0.1's config.json.
nlohmann::json MistralConfig() {
  return {{"architectures", {"MistralForCausalLM"}},
          {"model_type", "mistral"},
          {"vocab_size", 32000},
          {"hidden_size", 4096},
          {"intermediate_size", 14336},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 32768},
          {"sliding_window", 4096},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}};
}

// Llama-3.1-8B's config.json.
nlohmann::json Llama3Config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 128256},
          {"hidden_size", 4096},
          {"intermediate_size", 14336},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 131072},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 8.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}}};
}

// GPT-2 small's config.json.
nlohmann::json Gpt2Config() {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", 50257},
          {"n_embd", 768},
          {"n_layer", 12},
          {"n_head", 12},
          {"n_positions", 1024},
          {"n_ctx", 1024}};
}

class ProbeLengthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("probe_length_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ckpt");
    // One sample of 5000 ids, longer than any default.
    std::ofstream probe(dir_ / "probe.jsonl");
    probe << "[";
    for (int i = 0; i < 5000; ++i) probe << (i ? ", " : "") << 10 + i % 1000;
    probe << "]\n";
    auto extractor = CreateTorchExtractor(TorchExtractorOptions());
    ASSERT_TRUE(extractor.ok()) << extractor.status();
    extractor_ = std::move(*extractor);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // BuildProbe over a checkpoint directory holding `config` and nothing else.
  absl::StatusOr<Probe> Build(const nlohmann::json& config, int64_t seq_len = 0) {
    std::ofstream(dir_ / "ckpt" / "config.json") << config.dump(2);
    ProbeSpec spec;
    spec.file = dir_ / "probe.jsonl";
    spec.seq_len = seq_len;
    return extractor_->BuildProbe(dir_ / "ckpt", spec, FileGate::Host());
  }

  fs::path dir_;
  std::unique_ptr<Extractor> extractor_;
};

TEST_F(ProbeLengthTest, LongContextModelsDefaultToTheDefaultLengthBeforeAnyWeightIsRead) {
  for (const nlohmann::json& config : {MistralConfig(), Llama3Config()}) {
    SCOPED_TRACE(config["model_type"].get<std::string>());
    const auto probe = Build(config);
    ASSERT_TRUE(probe.ok()) << probe.status();
    ASSERT_EQ(probe->samples.size(), 1u);
    EXPECT_EQ(static_cast<int64_t>(probe->samples[0].size()), kDefaultSeqLen);
  }
}

TEST_F(ProbeLengthTest, AShorterMaximumIsTheDefaultLength) {
  nlohmann::json short_window = MistralConfig();
  short_window["sliding_window"] = 1024;
  nlohmann::json windowed_qwen2 = Llama3Config();
  windowed_qwen2["model_type"] = "qwen2";
  windowed_qwen2["architectures"] = {"Qwen2ForCausalLM"};
  windowed_qwen2["use_sliding_window"] = true;
  windowed_qwen2["sliding_window"] = 1536;
  for (const auto& [config, expected] :
       {std::pair{short_window, 1024}, std::pair{windowed_qwen2, 1536},
        std::pair{Gpt2Config(), 1024}}) {
    SCOPED_TRACE(config["model_type"].get<std::string>());
    const auto probe = Build(config);
    ASSERT_TRUE(probe.ok()) << probe.status();
    EXPECT_EQ(static_cast<int64_t>(probe->samples[0].size()), expected);
  }
}

TEST_F(ProbeLengthTest, AGivenLengthUpToTheMaximumIsKept) {
  const auto probe = Build(Llama3Config(), 4096);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->samples[0].size(), 4096u);
}

TEST_F(ProbeLengthTest, AGivenLengthPastTheSlidingWindowIsRefusedNamingIt) {
  const absl::Status status = Build(MistralConfig(), 4097).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--seq-len 4097 exceeds"), std::string::npos) << status;
  EXPECT_NE(status.message().find("(sliding_window 4096)"), std::string::npos) << status;
}

}  // namespace
}  // namespace anisoscope::analysis
