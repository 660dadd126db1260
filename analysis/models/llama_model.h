// LlamaModel: the LLaMA-shaped decoders in LibTorch, as Hugging Face's eval-mode
// LlamaModel, MistralModel, Qwen2Model (family "llama") and Olmo2Model (family "olmo2")
// compute them: RMSNorm, rotary over the whole head, SwiGLU, grouped-query attention, no
// biases unless the config asks (Qwen2: q/k/v). OLMo-2 adds RMSNorms over the whole query
// and key projections (before the head split and the rotary) and normalises each
// sub-layer's output instead of its input. Reports each block's Q and K (before and after
// the rotary embedding; a key head's K repeated for each of its query heads) and the causal
// attention probabilities. Immutable after Create; Forward may run concurrently.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/model_layers.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

struct LlamaConfig {
  std::string family;  // "llama" or "olmo2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  // "sliding_window" when a shorter window limits it.
  std::string max_positions_key = "max_position_embeddings";
  double rms_norm_eps = 1e-6;
  Activation hidden_act = Activation::kSilu;
  bool qkv_bias = false;     // q/k/v projections (attention_bias; always for Qwen2)
  bool output_bias = false;  // o_proj (attention_bias)
  bool mlp_bias = false;
  std::vector<double> inv_freq;  // rotary_frequencies.h, head_dim / 2 of them

  // Reads config.json; `family` "llama" or "olmo2". Errors name the file and the field.
  static absl::StatusOr<LlamaConfig> FromCheckpoint(const Checkpoint& checkpoint,
                                                    const std::string& family);
};

class LlamaModel : public TransformerModel {
 public:
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const Checkpoint& checkpoint,
                                                            const std::string& family,
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
    // RMSNorm gains of the two sub-layers: of their inputs (llama: input_layernorm,
    // post_attention_layernorm) or of their outputs (olmo2: post_attention_layernorm,
    // post_feedforward_layernorm).
    at::Tensor attention_norm, mlp_norm;
    at::Tensor q_norm, k_norm;  // olmo2: over the whole projections
    LinearWeights q_proj, k_proj, v_proj, o_proj;
    LinearWeights gate_proj, up_proj, down_proj;
  };

  LlamaModel(LlamaConfig config, at::Device device);

  bool olmo2() const { return config_.family == "olmo2"; }
  at::Tensor RunAttention(int layer, const at::Tensor& x, const at::Tensor& key_mask,
                          const RotaryTables& rotary, ForwardObserver& observer) const;
  at::Tensor RunMlp(const Block& block, const at::Tensor& x) const;

  LlamaConfig config_;
  ModelShape shape_;
  at::Device device_;
  EmbeddingWeights embed_tokens_;
  std::vector<Block> blocks_;
  at::Tensor final_norm_;
};

}  // namespace anisoscope::analysis
