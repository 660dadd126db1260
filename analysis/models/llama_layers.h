// What the LLaMA-shaped decoders (llama_model.h, olmo2_model.h) share, as Hugging Face's
// eval-mode models compute it: the config.json reader, grouped-query attention with rotary
// over the whole head, and the SwiGLU MLP. Immutable after loading; thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/models/model_layers.h"
#include "analysis/models/model_shape.h"
#include "analysis/models/rotary_frequencies.h"
#include "analysis/models/transformer_model.h"
#include "analysis/models/weight_lookup.h"

namespace anisoscope::analysis {

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  // The longest probe accepted: max_position_embeddings, or the sliding window where one
  // is shorter (Mistral; Qwen2 with use_sliding_window).
  int64_t max_positions = 0;
  std::string max_positions_key = "max_position_embeddings";
  double rms_norm_eps = 1e-6;
  Activation hidden_act = Activation::kSilu;
  bool qkv_bias = false;     // q/k/v projections (attention_bias; always for Qwen2)
  bool output_bias = false;  // o_proj (attention_bias)
  bool mlp_bias = false;
  // rotary_frequencies.h; the table (head_dim / 2 frequencies) is made by Rotary, only
  // once the weights have confirmed head_dim.
  RotaryScaling rotary;

  // Reads config.json (`json`, read from `file`), rms_norm_eps defaulting to
  // `default_rms_norm_eps` (the family's). Errors name the file and the field.
  static absl::StatusOr<LlamaConfig> FromConfig(const nlohmann::json& json,
                                                const std::filesystem::path& file,
                                                double default_rms_norm_eps);
  // The shape of family `family`'s model of this config.
  ModelShape Shape(const std::string& family) const;
  // HF's LlamaRotaryEmbedding tables for `length` positions, in `dtype` on `device`.
  RotaryTables Rotary(int64_t length, const at::Device& device, at::ScalarType dtype) const;
};

// A block's attention: q/k/v/o projections (biases as the config says).
struct LlamaAttention {
  LinearWeights q_proj, k_proj, v_proj, o_proj;

  // `prefix` + "q_proj" ... "o_proj", shaped by `config`; errors name tensor and file.
  static absl::StatusOr<LlamaAttention> Load(const WeightLookup& weights, const std::string& prefix,
                                             const LlamaConfig& config);
  // x [B, T, D]'s query [B, T, H * d_h] and key [B, T, H_kv * d_h] projections.
  at::Tensor Query(const at::Tensor& x) const { return Linear(x, q_proj); }
  at::Tensor Key(const at::Tensor& x) const { return Linear(x, k_proj); }
  // Block `layer`'s causal attention of x (through o_proj, before any residual) from its
  // projections `query` and `key` (normalised first where the family does): reports Q and
  // K before and after the rotary (a key head's K repeated for each of its query heads)
  // and the probabilities to `observer`.
  at::Tensor Attend(int layer, const at::Tensor& x, at::Tensor query, at::Tensor key,
                    const LlamaConfig& config, const at::Tensor& key_mask,
                    const RotaryTables& rotary, ForwardObserver& observer) const;
};

// The feed-forward: down_proj(act(gate_proj(x)) * up_proj(x)).
struct SwiGluMlp {
  LinearWeights gate_proj, up_proj, down_proj;

  // `prefix` + "gate_proj", "up_proj", "down_proj"; errors name tensor and file.
  static absl::StatusOr<SwiGluMlp> Load(const WeightLookup& weights, const std::string& prefix,
                                        const LlamaConfig& config);
  at::Tensor Run(const at::Tensor& x, Activation activation) const;
};

}  // namespace anisoscope::analysis
