// TransformerModel: the forward pass of one model family, reporting its internals.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"
#include "analysis/models/model_shape.h"

namespace anisoscope::analysis {

// Receives a forward's internals, one block at a time, on the forward's thread. Tensors
// are valid only during the call: an observer reduces them and keeps nothing large.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // hidden_states[index], [B, T, D], as HF output_hidden_states: index 0 is the embedding
  // output, index l+1 block l's; for pre-LN causal families (gpt2, gpt_neox) the last one,
  // index L, is after the final LayerNorm.
  virtual void OnHiddenState(int index, const at::Tensor& hidden) = 0;
  // Block `layer`: query and key vectors exactly as they enter QK^T ([B, H, T, d_h], before
  // the 1/sqrt(d_h) scale; after the rotary embedding for rotary models), and attention
  // probabilities [B, H, T, T] (keys masked by padding or causality are exactly 0).
  virtual void OnAttention(int layer, const at::Tensor& query, const at::Tensor& key,
                           const at::Tensor& probs) = 0;
  // Rotary models only, before OnAttention: block `layer`'s query and key [B, H, T, d_h]
  // before the rotary embedding (the pass-through dimensions equal OnAttention's).
  virtual void OnPreRotary(int /*layer*/, const at::Tensor& /*query*/, const at::Tensor& /*key*/) {}
};

struct ModelOptions {
  // Where the forward runs: "cpu", "cuda", "cuda:1".
  std::string device = "cpu";
  // Compute dtype: "float32" (default, whatever the stored dtype), "float16", "bfloat16".
  std::string dtype = "float32";
};

class TransformerModel {
 public:
  virtual ~TransformerModel() = default;
  virtual const ModelShape& shape() const = 0;
  virtual const at::Device& device() const = 0;
  // The input embedding matrix [V, D] and the gain [D] of the last LayerNorm before the
  // output (METRICS.md "Per checkpoint"), in their stored dtype.
  virtual const at::Tensor& input_embedding() const = 0;
  virtual const at::Tensor& final_norm_gain() const = 0;
  // input_ids and valid are [B, T] (int64, bool; right padding) on device(). Run under
  // torch::InferenceMode. Throws c10::Error on LibTorch failures (the extractor catches).
  virtual void Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                       ForwardObserver& observer) const = 0;
};

// The compute dtype named by ModelOptions::dtype; INVALID_ARGUMENT for any other name.
absl::StatusOr<at::ScalarType> ParseDtype(const std::string& dtype);

// Builds the model named by the checkpoint's config.json (model_type / architectures).
// INVALID_ARGUMENT for an unknown family (listing the supported ones), a malformed config
// field, or a missing or wrongly shaped tensor (naming tensor and file).
absl::StatusOr<std::unique_ptr<TransformerModel>> CreateModel(const Checkpoint& checkpoint,
                                                              const ModelOptions& options);

// The shape CreateModel gives the checkpoint whose config.json is `config` (read from
// `config_path`), from the config alone: no weight is read. Its max_positions is the
// longest sample the model accepts (the family's config reader says which key sets it).
// Errors as CreateModel's for the config.
absl::StatusOr<ModelShape> ReadModelShape(const nlohmann::json& config,
                                          const std::filesystem::path& config_path);

}  // namespace anisoscope::analysis
