// ReadModelShape: the shape CreateModel gives, from config.json alone (the family's config
// reader, its sliding window included), and the family names' one home (model_shape.h)
// tied to the factory.
#include "analysis/models/model_shape.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>

#include "analysis/models/transformer_model.h"
#include "tests/analysis/checkpoint/checkpoint_test_util.h"
#include "tests/analysis/models/tiny_checkpoint.h"

namespace anisoscope::analysis {
namespace {

const std::filesystem::path kConfigPath = "/checkpoints/step1/config.json";

void ExpectSameShape(const ModelShape& read, const ModelShape& built) {
  EXPECT_EQ(read.family, built.family);
  EXPECT_EQ(read.num_layers, built.num_layers);
  EXPECT_EQ(read.num_heads, built.num_heads);
  EXPECT_EQ(read.head_dim, built.head_dim);
  EXPECT_EQ(read.hidden_size, built.hidden_size);
  EXPECT_EQ(read.vocab_size, built.vocab_size);
  EXPECT_EQ(read.max_positions, built.max_positions);
  EXPECT_EQ(read.max_positions_key, built.max_positions_key);
  EXPECT_EQ(read.causal, built.causal);
}

TEST(ModelShapeTest, ReadFromTheConfigAloneItIsTheBuiltModelsShape) {
  for (const auto& [tiny, name] :
       {std::pair{TinyNeoX(), "gpt_neox"}, std::pair{TinyGPT2(), "gpt2"},
        std::pair{TinyLlama(), "llama"}, std::pair{TinyLlama(/*olmo2=*/true), "olmo2"}}) {
    SCOPED_TRACE(name);
    const auto read = ReadModelShape(tiny.config, kConfigPath);
    ASSERT_TRUE(read.ok()) << read.status();
    const auto model = LoadModel(tiny, name);
    ASSERT_NE(model, nullptr);
    ExpectSameShape(*read, model->shape());
  }
}

TEST(ModelShapeTest, ASlidingWindowShorterThanTheModelIsItsMaximumLength) {
  TinyCheckpoint mistral = TinyLlama();
  mistral.config["model_type"] = "mistral";
  mistral.config["sliding_window"] = 8;
  TinyCheckpoint qwen2 = mistral;
  qwen2.config["model_type"] = "qwen2";
  TinyCheckpoint qwen2_windowed = qwen2;
  qwen2_windowed.config["use_sliding_window"] = true;
  TinyCheckpoint mistral_long_window = mistral;
  mistral_long_window.config["sliding_window"] = 4096;
  for (const auto& [tiny, max_positions, key] :
       {std::tuple{mistral, 8, "sliding_window"}, std::tuple{qwen2_windowed, 8, "sliding_window"},
        std::tuple{qwen2, 32, "max_position_embeddings"},
        std::tuple{mistral_long_window, 32, "max_position_embeddings"}}) {
    SCOPED_TRACE(tiny.config.dump());
    const auto read = ReadModelShape(tiny.config, kConfigPath);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->family, "llama");
    EXPECT_EQ(read->max_positions, max_positions);
    EXPECT_EQ(read->max_positions_key, key);
  }
}

TEST(ModelShapeTest, ConfigErrorsAreCreateModelsNamingTheConfigFile) {
  TinyCheckpoint unknown = TinyGPT2();
  unknown.config["model_type"] = "mamba";
  EXPECT_TRUE(StatusIs(ReadModelShape(unknown.config, kConfigPath).status(),
                       absl::StatusCode::kInvalidArgument, kConfigPath.string(),
                       "'mamba' is not supported"));
  TinyCheckpoint missing = TinyLlama();
  missing.config.erase("max_position_embeddings");
  EXPECT_TRUE(StatusIs(ReadModelShape(missing.config, kConfigPath).status(),
                       absl::StatusCode::kInvalidArgument, kConfigPath.string(),
                       "field 'max_position_embeddings' is missing"));
}

// Every name of ModelFamilies() is a family the factory makes and names so, and the
// factory supports no other.
TEST(ModelShapeTest, TheFactoryMakesExactlyTheListedFamilies) {
  const nlohmann::json bert = {
      {"model_type", "bert"},         {"vocab_size", 50},         {"hidden_size", 16},
      {"num_hidden_layers", 2},       {"num_attention_heads", 2}, {"intermediate_size", 32},
      {"max_position_embeddings", 32}};
  const std::map<std::string, nlohmann::json> configs = {
      {"bert", bert},
      {"gpt_neox", TinyNeoX().config},
      {"gpt2", TinyGPT2().config},
      {"llama", TinyLlama().config},
      {"olmo2", TinyLlama(/*olmo2=*/true).config}};
  for (const std::string& family : ModelFamilies()) {
    SCOPED_TRACE(family);
    ASSERT_EQ(configs.count(family), 1u) << "no test config for a listed family";
    const auto read = ReadModelShape(configs.at(family), kConfigPath);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->family, family);
  }
  nlohmann::json unknown = bert;
  unknown["model_type"] = "mamba";
  const std::string message(ReadModelShape(unknown, kConfigPath).status().message());
  ASSERT_NE(message.find("supported families: "), std::string::npos) << message;
  const std::string supported = message.substr(message.find("supported families: "));
  size_t listed = 0;
  for (size_t at = supported.find(" ("); at != std::string::npos;
       at = supported.find(" (", at + 1)) {
    ++listed;
  }
  EXPECT_EQ(listed, ModelFamilies().size()) << message;
  for (const std::string& family : ModelFamilies()) {
    EXPECT_NE(supported.find(family + " ("), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace anisoscope::analysis
