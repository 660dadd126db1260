// BertModel: Hugging Face BertModel (eval mode) in LibTorch, reporting each block's Q, K
// and attention probabilities to a ForwardObserver. Immutable after Create; Forward may
// run concurrently from several threads.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/model_layers.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  Activation hidden_act = Activation::kGelu;

  // Reads config.json (`json`, read from `file`); errors name the file and the field.
  static absl::StatusOr<BertConfig> FromConfig(const nlohmann::json& json,
                                               const std::filesystem::path& file);
  // The shape of the model of this config.
  ModelShape Shape() const;
};

class BertModel : public TransformerModel {
 public:
  // The shape Create gives, from config.json (`config`, read from `file`) alone: no weight
  // is read. Errors as Create's for the config.
  static absl::StatusOr<ModelShape> ReadShape(const nlohmann::json& config,
                                              const std::filesystem::path& file);
  static absl::StatusOr<std::unique_ptr<BertModel>> Create(const Checkpoint& checkpoint,
                                                           const at::Device& device,
                                                           at::ScalarType dtype);

  const ModelShape& shape() const override { return shape_; }
  const at::Device& device() const override { return device_; }
  const at::Tensor& input_embedding() const override { return word_embeddings_.weight; }
  const at::Tensor& final_norm_gain() const override { return blocks_.back().output_norm.weight; }
  void Forward(const at::Tensor& input_ids, const at::Tensor& valid,
               ForwardObserver& observer) const override;

 private:
  struct Block {
    LinearWeights query, key, value, attention_output;
    LayerNormWeights attention_norm;
    LinearWeights intermediate, output;
    LayerNormWeights output_norm;
  };

  BertModel(BertConfig config, at::Device device);

  at::Tensor Embed(const at::Tensor& input_ids) const;
  at::Tensor RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                      ForwardObserver& observer) const;
  // The block's attention sublayer, through its LayerNorm. Its own method so that Q, K, V
  // and the probabilities are freed before the feed-forward makes its wider tensors.
  at::Tensor RunAttention(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                          ForwardObserver& observer) const;

  BertConfig config_;
  ModelShape shape_;
  at::Device device_;
  EmbeddingWeights word_embeddings_, position_embeddings_, token_type_embeddings_;
  LayerNormWeights embedding_norm_;
  std::vector<Block> blocks_;
};

}  // namespace anisoscope::analysis
