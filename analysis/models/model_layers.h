// The building blocks every family shares, as Hugging Face computes them (eval mode):
// embeddings, linear and Conv1D projections, LayerNorm, activations, head splitting and the
// masked attention softmax. Free functions on tensors; thread-safe.
//
// Weights may be held in a dtype other than the compute dtype (on the CPU they stay as
// stored, see WeightLookup): each function converts the weights it uses to the dtype of
// its input, one projection at a time, so narrow weights are never widened all at once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "analysis/models/config_reader.h"
#include "analysis/models/weight_lookup.h"

namespace anisoscope::analysis {

// y = x W^T + b, W [out, in]; `bias` is undefined for bias-free projections.
struct LinearWeights {
  at::Tensor weight;
  at::Tensor bias;
};

// An embedding table [rows, dim] and the compute dtype its rows are converted to.
struct EmbeddingWeights {
  at::Tensor weight;
  at::ScalarType dtype = at::kFloat;
};

struct LayerNormWeights {
  at::Tensor weight;
  at::Tensor bias;
};

// The feed-forward activations of HF ACT2FN that the families use.
enum class Activation { kGelu, kGeluNew, kGeluFast, kGeluPytorchTanh, kRelu, kSilu };

// Reads config field `field` (default `default_name` when missing); INVALID_ARGUMENT naming
// the file, the field and the supported names for anything else.
absl::StatusOr<Activation> ReadActivation(const ConfigReader& reader, const std::string& field,
                                          const std::string& default_name);

// `name`.weight [rows, dim].
absl::StatusOr<EmbeddingWeights> LoadEmbedding(const WeightLookup& weights, const std::string& name,
                                               int64_t rows, int64_t dim);
// `name`.weight [out, in] and, when `with_bias`, `name`.bias [out].
absl::StatusOr<LinearWeights> LoadLinear(const WeightLookup& weights, const std::string& name,
                                         int64_t out, int64_t in, bool with_bias = true);
// A GPT-2 Conv1D: `name`.weight stored input-major [in, out] (y = x W + b), returned
// transposed so that Linear applies it.
absl::StatusOr<LinearWeights> LoadConv1D(const WeightLookup& weights, const std::string& name,
                                         int64_t in, int64_t out);
// `name`.weight and `name`.bias, both [dim].
absl::StatusOr<LayerNormWeights> LoadLayerNorm(const WeightLookup& weights, const std::string& name,
                                               int64_t dim);

// The rows `ids` of `table` ([..., dim]) in its compute dtype.
at::Tensor EmbeddingRows(const EmbeddingWeights& table, const at::Tensor& ids);
// `x` by value: a temporary argument is freed once read, before the output is made.
at::Tensor Linear(at::Tensor x, const LinearWeights& linear);
at::Tensor LayerNorm(const at::Tensor& x, const LayerNormWeights& norm, double eps);
// HF's LlamaRMSNorm: x / sqrt(mean(x²) + eps) over the last dim in float32, times `weight`,
// in x's dtype.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);
// In place: `x`'s storage is overwritten (pass the projection's fresh output, not a tensor
// that is read again), so the feed-forward's widest tensor is held once, not twice.
at::Tensor Activate(at::Tensor x, Activation activation);

// HF's rotary tables for positions 0 … length-1: cos and sin of the float32 angles
// t * inv_freq, each frequency twice (cat(freqs, freqs)), [length, 2 F] in `dtype`, on
// inv_freq's device (inv_freq: [F] float32).
struct RotaryTables {
  at::Tensor cos, sin;
};
RotaryTables MakeRotaryTables(const at::Tensor& inv_freq, int64_t length, at::ScalarType dtype);
// HF apply_rotary_pos_emb over x's last dim: x cos + rotate_half(x) sin, with
// rotate_half(x) = cat(-x2, x1) of its two halves.
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& tables);

// [B, T, H * d_h] -> [B, H, T, d_h] (a view) and back (a copy).
at::Tensor SplitHeads(const at::Tensor& x, int64_t heads);
at::Tensor MergeHeads(const at::Tensor& x);

// Bool [B, 1, 1, T]: the keys every query may see in a bidirectional model.
at::Tensor PaddingKeyMask(const at::Tensor& valid);
// Bool [B, 1, T, T]: key j is valid and j <= i (causal models).
at::Tensor CausalKeyMask(const at::Tensor& valid);

// query key^T for [B, H, T, d_h] operands: the scores [B, H, T, T], unscaled. The operands
// are made contiguous first: LibTorch's CPU matmul of the head-split views (strided) took
// a path up to 4x slower (measured at 16 x 512 tokens).
at::Tensor AttentionScores(const at::Tensor& query, const at::Tensor& key);

// softmax over the last dim of `scores` with disallowed entries (mask false) set to exactly
// 0. Every row must allow at least one key. Consumes `scores` (fills it in place).
at::Tensor MaskedSoftmax(at::Tensor scores, const at::Tensor& allowed);

}  // namespace anisoscope::analysis
