// GPTNeoXModel: Hugging Face GPTNeoXModel (Pythia; eval mode) in LibTorch, reporting each
// block's Q and K (before and after the rotary embedding) and causal attention
// probabilities to a ForwardObserver. Immutable after Create; Forward may run concurrently
// from several threads.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/model_layers.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

struct GPTNeoXConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  double layer_norm_eps = 1e-5;
  Activation hidden_act = Activation::kGelu;
  int64_t rotary_ndims = 0;  // int(head_dim * rotary_pct): the rotated leading dims
  double rotary_base = 10000;
  bool use_parallel_residual = true;
  bool attention_bias = true;

  // Reads config.json (`json`, read from `file`); errors name the file and the field.
  static absl::StatusOr<GPTNeoXConfig> FromConfig(const nlohmann::json& json,
                                                  const std::filesystem::path& file);
  // The shape of the model of this config.
  ModelShape Shape() const;
};

class GPTNeoXModel : public TransformerModel {
 public:
  // The shape Create gives, from config.json (`config`, read from `file`) alone: no weight
  // is read. Errors as Create's for the config.
  static absl::StatusOr<ModelShape> ReadShape(const nlohmann::json& config,
                                              const std::filesystem::path& file);
  static absl::StatusOr<std::unique_ptr<GPTNeoXModel>> Create(const Checkpoint& checkpoint,
                                                              const at::Device& device,
                                                              at::ScalarType dtype);

  const ModelShape& shape() const override { return shape_; }
  const at::Device& device() const override { return device_; }
  const at::Tensor& input_embedding() const override { return embed_in_.weight; }
  const at::Tensor& final_norm_gain() const override { return final_norm_.weight; }
  void Forward(const at::Tensor& input_ids, const at::Tensor& valid,
               ForwardObserver& observer) const override;

 private:
  struct Block {
    LayerNormWeights input_norm, post_attention_norm;
    LinearWeights query_key_value, dense;
    LinearWeights dense_h_to_4h, dense_4h_to_h;
  };

  GPTNeoXModel(GPTNeoXConfig config, at::Device device);

  // x [B, H, T, d_h] with its first rotary_ndims dims rotated (tables [T, rotary_ndims]).
  at::Tensor ApplyPartialRotary(const at::Tensor& x, const RotaryTables& rotary) const;
  at::Tensor RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                      const RotaryTables& rotary, ForwardObserver& observer) const;
  // The block's attention output (through `dense`, before any residual). Its own method so
  // that Q, K, V and the probabilities are freed before the MLP makes its wider tensors.
  at::Tensor RunAttention(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                          const RotaryTables& rotary, ForwardObserver& observer) const;

  GPTNeoXConfig config_;
  ModelShape shape_;
  at::Device device_;
  EmbeddingWeights embed_in_;
  std::vector<Block> blocks_;
  LayerNormWeights final_norm_;
};

}  // namespace anisoscope::analysis
