#include "analysis/models/gpt_neox_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/config_reader.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {

absl::StatusOr<GPTNeoXConfig> GPTNeoXConfig::FromConfig(const nlohmann::json& json,
                                                        const std::filesystem::path& file) {
  const ConfigReader reader(json, file);
  GPTNeoXConfig config;
  ASSIGN_OR_RETURN(config.vocab_size, reader.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(config.num_layers, reader.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config.num_heads, reader.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(config.max_positions, reader.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(config.layer_norm_eps, reader.PositiveNumber("layer_norm_eps", 1e-5));
  ASSIGN_OR_RETURN(config.hidden_act, ReadActivation(reader, "hidden_act", "gelu"));
  ASSIGN_OR_RETURN(config.use_parallel_residual, reader.Bool("use_parallel_residual", true));
  ASSIGN_OR_RETURN(config.attention_bias, reader.Bool("attention_bias", true));
  // Newer transformers name the base rope_theta and the fraction partial_rotary_factor.
  const std::string base_field = reader.IsSet("rope_theta") ? "rope_theta" : "rotary_emb_base";
  ASSIGN_OR_RETURN(config.rotary_base, reader.PositiveNumber(base_field, 10000));
  const std::string pct_field = !reader.IsSet("rotary_pct") && reader.IsSet("partial_rotary_factor")
                                    ? "partial_rotary_factor"
                                    : "rotary_pct";
  ASSIGN_OR_RETURN(const double rotary_pct, reader.PositiveNumber(pct_field, 0.25));
  if (reader.IsSet("rope_scaling")) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("rope_scaling"), " is ", json.at("rope_scaling").dump(),
                     "; rotary scaling is not supported (only null)"));
  }
  if (config.hidden_size % config.num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("hidden_size"), " (", config.hidden_size,
                     ") is not a multiple of num_attention_heads (", config.num_heads, ")"));
  }
  const int64_t head_dim = config.hidden_size / config.num_heads;
  config.rotary_ndims = static_cast<int64_t>(static_cast<double>(head_dim) * rotary_pct);
  if (rotary_pct > 1 || config.rotary_ndims < 2 || config.rotary_ndims % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.Describe(pct_field), " (", rotary_pct, ") gives ", config.rotary_ndims,
        " rotary dimensions of a ", head_dim, "-dimensional head; need an even number >= 2"));
  }
  return config;
}

ModelShape GPTNeoXConfig::Shape() const {
  return MakeModelShape(kGptNeoXFamily, num_layers, num_heads, hidden_size, vocab_size,
                        max_positions, /*causal=*/true);
}

GPTNeoXModel::GPTNeoXModel(GPTNeoXConfig config, at::Device device)
    : config_(std::move(config)), shape_(config_.Shape()), device_(device) {}

absl::StatusOr<ModelShape> GPTNeoXModel::ReadShape(const nlohmann::json& config,
                                                   const std::filesystem::path& file) {
  ASSIGN_OR_RETURN(const GPTNeoXConfig read, GPTNeoXConfig::FromConfig(config, file));
  return read.Shape();
}

absl::StatusOr<std::unique_ptr<GPTNeoXModel>> GPTNeoXModel::Create(const Checkpoint& checkpoint,
                                                                   const at::Device& device,
                                                                   at::ScalarType dtype) {
  ASSIGN_OR_RETURN(GPTNeoXConfig config,
                   GPTNeoXConfig::FromConfig(checkpoint.config(), checkpoint.config_path()));
  std::unique_ptr<GPTNeoXModel> model(new GPTNeoXModel(config, device));
  const WeightLookup weights(checkpoint, {"", "gpt_neox."},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  const int64_t inner = config.intermediate_size;

  ASSIGN_OR_RETURN(model->embed_in_, LoadEmbedding(weights, "embed_in", config.vocab_size, d));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    Block block;
    ASSIGN_OR_RETURN(block.input_norm, LoadLayerNorm(weights, prefix + "input_layernorm", d));
    ASSIGN_OR_RETURN(block.post_attention_norm,
                     LoadLayerNorm(weights, prefix + "post_attention_layernorm", d));
    ASSIGN_OR_RETURN(
        block.query_key_value,
        LoadLinear(weights, prefix + "attention.query_key_value", 3 * d, d, config.attention_bias));
    ASSIGN_OR_RETURN(block.dense,
                     LoadLinear(weights, prefix + "attention.dense", d, d, config.attention_bias));
    ASSIGN_OR_RETURN(block.dense_h_to_4h,
                     LoadLinear(weights, prefix + "mlp.dense_h_to_4h", inner, d));
    ASSIGN_OR_RETURN(block.dense_4h_to_h,
                     LoadLinear(weights, prefix + "mlp.dense_4h_to_h", d, inner));
    model->blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model->final_norm_, LoadLayerNorm(weights, "final_layer_norm", d));
  return model;
}

at::Tensor GPTNeoXModel::ApplyPartialRotary(const at::Tensor& x, const RotaryTables& rotary) const {
  const int64_t dims = config_.rotary_ndims;
  return at::cat(
      {ApplyRotary(x.narrow(-1, 0, dims), rotary), x.narrow(-1, dims, x.size(-1) - dims)}, -1);
}

at::Tensor GPTNeoXModel::RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                                  const RotaryTables& rotary, ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const double eps = config_.layer_norm_eps;
  const at::Tensor attention = RunAttention(layer, hidden, key_mask, rotary, observer);
  auto mlp = [&](const at::Tensor& x) {
    return Linear(
        Activate(Linear(LayerNorm(x, block.post_attention_norm, eps), block.dense_h_to_4h),
                 config_.hidden_act),
        block.dense_4h_to_h);
  };
  if (config_.use_parallel_residual) return mlp(hidden) + attention + hidden;
  const at::Tensor attended = attention + hidden;
  return mlp(attended) + attended;
}

at::Tensor GPTNeoXModel::RunAttention(int layer, const at::Tensor& hidden,
                                      const at::Tensor& key_mask, const RotaryTables& rotary,
                                      ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const int64_t batch = hidden.size(0);
  const int64_t length = hidden.size(1);
  const int64_t heads = config_.num_heads;
  const int64_t head_dim = config_.hidden_size / heads;
  const double eps = config_.layer_norm_eps;

  // The fused projection is laid out per head as [q | k | v].
  const at::Tensor qkv = Linear(LayerNorm(hidden, block.input_norm, eps), block.query_key_value)
                             .view({batch, length, heads, 3 * head_dim})
                             .permute({0, 2, 1, 3});
  const at::Tensor value = qkv.narrow(-1, 2 * head_dim, head_dim);
  at::Tensor query = qkv.narrow(-1, 0, head_dim);
  at::Tensor key = qkv.narrow(-1, head_dim, head_dim);
  observer.OnPreRotary(layer, query, key);
  query = ApplyPartialRotary(query, rotary);
  key = ApplyPartialRotary(key, rotary);

  at::Tensor probs =
      MaskedSoftmax(AttentionScores(query, key).mul_(1.0 / std::sqrt(double(head_dim))), key_mask);
  observer.OnAttention(layer, query, key, probs);
  at::Tensor context = MergeHeads(at::matmul(probs, value));
  probs.reset();
  return Linear(std::move(context), block.dense);
}

void GPTNeoXModel::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                           ForwardObserver& observer) const {
  at::Tensor hidden = EmbeddingRows(embed_in_, input_ids);
  observer.OnHiddenState(0, hidden);

  // HF RotaryEmbedding: float32 inv_freq = base^(-2i / rotary_ndims).
  const int64_t dims = config_.rotary_ndims;
  const at::TensorOptions float32 = at::TensorOptions().device(device_).dtype(at::kFloat);
  const at::Tensor inv_freq =
      1.0 / at::pow(config_.rotary_base, at::arange(0, dims, 2, float32) / double(dims));
  const RotaryTables rotary = MakeRotaryTables(inv_freq, input_ids.size(1), hidden.scalar_type());

  const at::Tensor key_mask = CausalKeyMask(valid);
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    hidden = RunBlock(layer, hidden, key_mask, rotary, observer);
    if (layer + 1 < shape_.num_layers) observer.OnHiddenState(layer + 1, hidden);
  }
  observer.OnHiddenState(shape_.num_layers, LayerNorm(hidden, final_norm_, config_.layer_norm_eps));
}

}  // namespace anisoscope::analysis
