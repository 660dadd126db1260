// ModelShape: the dimensions of a loaded model, as the metrics and the server see them.
// Plain data, no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace anisoscope::analysis {

struct ModelShape {
  std::string family;  // config.json model_type, e.g. "bert"
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
  // The config.json key max_positions comes from, for messages.
  std::string max_positions_key = "max_position_embeddings";
  bool causal = false;
};

// The ModelShape::family of each family the engine makes: the one home of these names.
inline constexpr char kBertFamily[] = "bert";
inline constexpr char kGpt2Family[] = "gpt2";
inline constexpr char kGptNeoXFamily[] = "gpt_neox";
inline constexpr char kLlamaFamily[] = "llama";  // also Mistral and Qwen2
inline constexpr char kOlmo2Family[] = "olmo2";

// Every ModelShape::family the engine makes (model_factory.cc's CreateModel has a row for
// each, a test checks): what a worker may report as a checkpoint's family.
inline const std::vector<std::string>& ModelFamilies() {
  static const auto* const families = new std::vector<std::string>{
      kBertFamily, kGpt2Family, kGptNeoXFamily, kLlamaFamily, kOlmo2Family};
  return *families;
}

// The shape of a model whose hidden size splits evenly into `num_heads` heads.
inline ModelShape MakeModelShape(std::string family, int64_t num_layers, int64_t num_heads,
                                 int64_t hidden_size, int64_t vocab_size, int64_t max_positions,
                                 bool causal) {
  ModelShape shape;
  shape.family = std::move(family);
  shape.num_layers = static_cast<int>(num_layers);
  shape.num_heads = static_cast<int>(num_heads);
  shape.head_dim = static_cast<int>(hidden_size / num_heads);
  shape.hidden_size = static_cast<int>(hidden_size);
  shape.vocab_size = vocab_size;
  shape.max_positions = max_positions;
  shape.causal = causal;
  return shape;
}

}  // namespace anisoscope::analysis
