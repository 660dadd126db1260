// GPT2Model: Hugging Face GPT2Model (GPT-2, Stanford CRFM Mistral; eval mode) in LibTorch,
// reporting each block's Q, K and causal attention probabilities to a ForwardObserver.
// Immutable after Create; Forward may run concurrently from several threads.
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

struct GPT2Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;    // n_embd
  int64_t num_layers = 0;     // n_layer
  int64_t num_heads = 0;      // n_head
  int64_t inner_size = 0;     // n_inner, 4 * n_embd when null
  int64_t max_positions = 0;  // n_positions
  double layer_norm_eps = 1e-5;
  Activation activation = Activation::kGeluNew;
  bool scale_attn_weights = true;                // logits / sqrt(d_h)
  bool scale_attn_by_inverse_layer_idx = false;  // logits / (layer + 1)
  bool reorder_and_upcast_attn = false;          // scores and softmax in float32

  // Reads config.json (`json`, read from `file`); errors name the file and the field.
  static absl::StatusOr<GPT2Config> FromConfig(const nlohmann::json& json,
                                               const std::filesystem::path& file);
  // The shape of the model of this config.
  ModelShape Shape() const;
};

class GPT2Model : public TransformerModel {
 public:
  // The shape Create gives, from config.json (`config`, read from `file`) alone: no weight
  // is read. Errors as Create's for the config.
  static absl::StatusOr<ModelShape> ReadShape(const nlohmann::json& config,
                                              const std::filesystem::path& file);
  static absl::StatusOr<std::unique_ptr<GPT2Model>> Create(const Checkpoint& checkpoint,
                                                           const at::Device& device,
                                                           at::ScalarType dtype);

  const ModelShape& shape() const override { return shape_; }
  const at::Device& device() const override { return device_; }
  const at::Tensor& input_embedding() const override { return wte_.weight; }
  const at::Tensor& final_norm_gain() const override { return ln_f_.weight; }
  void Forward(const at::Tensor& input_ids, const at::Tensor& valid,
               ForwardObserver& observer) const override;

 private:
  struct Block {
    LayerNormWeights ln_1, ln_2;
    LinearWeights c_attn, attn_proj;  // Conv1D weights, stored transposed
    LinearWeights c_fc, mlp_proj;
  };

  GPT2Model(GPT2Config config, at::Device device);

  // Attention probabilities [B, H, T, T] in the dtype of `value`, as HF _attn or
  // _upcast_and_reordered_attn computes them.
  at::Tensor AttentionProbs(int layer, const at::Tensor& query, const at::Tensor& key,
                            const at::Tensor& key_mask) const;
  at::Tensor RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                      ForwardObserver& observer) const;
  // The block's attention sublayer with its residual. Its own method so that Q, K, V and
  // the probabilities are freed before the MLP makes its wider tensors.
  at::Tensor RunAttention(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                          ForwardObserver& observer) const;

  GPT2Config config_;
  ModelShape shape_;
  at::Device device_;
  EmbeddingWeights wte_, wpe_;
  std::vector<Block> blocks_;
  LayerNormWeights ln_f_;
};

}  // namespace anisoscope::analysis
