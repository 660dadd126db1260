// Olmo2Model: Hugging Face's eval-mode Olmo2Model (family "olmo2") in LibTorch: LLaMA's
// decoder (llama_layers.h) with RMSNorms over the whole query and key projections (before
// the head split and the rotary), and each sub-layer's output normalised instead of its
// input. Reports each block's Q and K (before and after the rotary embedding; a key head's
// K repeated for each of its query heads) and the causal attention probabilities.
// Immutable after Create; Forward may run concurrently.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/llama_layers.h"
#include "analysis/models/model_layers.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

class Olmo2Model : public TransformerModel {
 public:
  // The shape Create gives, from config.json (`config`, read from `file`) alone: no weight
  // is read. Errors as Create's for the config.
  static absl::StatusOr<ModelShape> ReadShape(const nlohmann::json& config,
                                              const std::filesystem::path& file);
  static absl::StatusOr<std::unique_ptr<Olmo2Model>> Create(const Checkpoint& checkpoint,
                                                            const at::Device& device,
                                                            at::ScalarType dtype);

  const ModelShape& shape() const override { return shape_; }
  const at::Device& device() const override { return device_; }
  const at::Tensor& input_embedding() const override { return embed_tokens_.weight; }
  const at::Tensor& final_norm_gain() const override { return final_norm_; }
  void Forward(const at::Tensor& input_ids, const at::Tensor& valid,
               ForwardObserver& observer) const override;

 private:
  struct Block {
    // RMSNorm gains of the sub-layers' outputs.
    at::Tensor post_attention_norm, post_feedforward_norm;
    at::Tensor q_norm, k_norm;  // over the whole projections
    LlamaAttention attention;
    SwiGluMlp mlp;
  };

  Olmo2Model(LlamaConfig config, at::Device device);

  // Block `layer`'s attention output of x (before its norm and the residual).
  at::Tensor RunAttention(int layer, const at::Tensor& x, const at::Tensor& key_mask,
                          const RotaryTables& rotary, ForwardObserver& observer) const;

  LlamaConfig config_;
  ModelShape shape_;
  at::Device device_;
  EmbeddingWeights embed_tokens_;
  std::vector<Block> blocks_;
  at::Tensor final_norm_;
};

}  // namespace anisoscope::analysis
