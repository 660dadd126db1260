#include "analysis/models/gpt2_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/config_reader.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {

absl::StatusOr<GPT2Config> GPT2Config::FromConfig(const nlohmann::json& json,
                                                  const std::filesystem::path& file) {
  const ConfigReader reader(json, file);
  GPT2Config config;
  ASSIGN_OR_RETURN(config.vocab_size, reader.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.PositiveInt("n_embd"));
  ASSIGN_OR_RETURN(config.num_layers, reader.PositiveInt("n_layer"));
  ASSIGN_OR_RETURN(config.num_heads, reader.PositiveInt("n_head"));
  ASSIGN_OR_RETURN(config.max_positions, reader.PositiveInt("n_positions"));
  config.inner_size = 4 * config.hidden_size;
  if (reader.IsSet("n_inner")) {
    ASSIGN_OR_RETURN(config.inner_size, reader.PositiveInt("n_inner"));
  }
  ASSIGN_OR_RETURN(config.layer_norm_eps, reader.PositiveNumber("layer_norm_epsilon", 1e-5));
  ASSIGN_OR_RETURN(config.activation, ReadActivation(reader, "activation_function", "gelu_new"));
  ASSIGN_OR_RETURN(config.scale_attn_weights, reader.Bool("scale_attn_weights", true));
  ASSIGN_OR_RETURN(config.scale_attn_by_inverse_layer_idx,
                   reader.Bool("scale_attn_by_inverse_layer_idx", false));
  ASSIGN_OR_RETURN(config.reorder_and_upcast_attn, reader.Bool("reorder_and_upcast_attn", false));
  if (config.hidden_size % config.num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("n_embd"), " (", config.hidden_size,
                     ") is not a multiple of n_head (", config.num_heads, ")"));
  }
  return config;
}

ModelShape GPT2Config::Shape() const {
  ModelShape shape = MakeModelShape(kGpt2Family, num_layers, num_heads, hidden_size, vocab_size,
                                    max_positions, /*causal=*/true);
  shape.max_positions_key = "n_positions";
  return shape;
}

GPT2Model::GPT2Model(GPT2Config config, at::Device device)
    : config_(std::move(config)), shape_(config_.Shape()), device_(device) {}

absl::StatusOr<ModelShape> GPT2Model::ReadShape(const nlohmann::json& config,
                                                const std::filesystem::path& file) {
  ASSIGN_OR_RETURN(const GPT2Config read, GPT2Config::FromConfig(config, file));
  return read.Shape();
}

absl::StatusOr<std::unique_ptr<GPT2Model>> GPT2Model::Create(const Checkpoint& checkpoint,
                                                             const at::Device& device,
                                                             at::ScalarType dtype) {
  ASSIGN_OR_RETURN(GPT2Config config,
                   GPT2Config::FromConfig(checkpoint.config(), checkpoint.config_path()));
  std::unique_ptr<GPT2Model> model(new GPT2Model(config, device));
  const WeightLookup weights(checkpoint, {"", "transformer."},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  const int64_t inner = config.inner_size;

  ASSIGN_OR_RETURN(model->wte_, LoadEmbedding(weights, "wte", config.vocab_size, d));
  ASSIGN_OR_RETURN(model->wpe_, LoadEmbedding(weights, "wpe", config.max_positions, d));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("h.", l, ".");
    Block block;
    ASSIGN_OR_RETURN(block.ln_1, LoadLayerNorm(weights, prefix + "ln_1", d));
    ASSIGN_OR_RETURN(block.c_attn, LoadConv1D(weights, prefix + "attn.c_attn", d, 3 * d));
    ASSIGN_OR_RETURN(block.attn_proj, LoadConv1D(weights, prefix + "attn.c_proj", d, d));
    ASSIGN_OR_RETURN(block.ln_2, LoadLayerNorm(weights, prefix + "ln_2", d));
    ASSIGN_OR_RETURN(block.c_fc, LoadConv1D(weights, prefix + "mlp.c_fc", d, inner));
    ASSIGN_OR_RETURN(block.mlp_proj, LoadConv1D(weights, prefix + "mlp.c_proj", inner, d));
    model->blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model->ln_f_, LoadLayerNorm(weights, "ln_f", d));
  return model;
}

at::Tensor GPT2Model::AttentionProbs(int layer, const at::Tensor& query, const at::Tensor& key,
                                     const at::Tensor& key_mask) const {
  const double head_dim = static_cast<double>(query.size(-1));
  if (config_.reorder_and_upcast_attn) {
    // HF _upcast_and_reordered_attn: one float32 product scaled by the combined factor.
    double scale = 1.0;
    if (config_.scale_attn_weights) scale /= std::sqrt(head_dim);
    if (config_.scale_attn_by_inverse_layer_idx) scale /= static_cast<double>(layer + 1);
    at::Tensor scores = AttentionScores(query.to(at::kFloat), key.to(at::kFloat)).mul_(scale);
    return MaskedSoftmax(std::move(scores), key_mask).to(query.scalar_type());
  }
  // HF _attn: divide in the compute dtype, by sqrt(d_h) and then by layer + 1.
  at::Tensor scores = AttentionScores(query, key);
  if (config_.scale_attn_weights) scores.div_(std::sqrt(head_dim));
  if (config_.scale_attn_by_inverse_layer_idx) scores.div_(static_cast<double>(layer + 1));
  return MaskedSoftmax(std::move(scores), key_mask);
}

at::Tensor GPT2Model::RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                               ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const at::Tensor attended = RunAttention(layer, hidden, key_mask, observer);
  return attended + Linear(Activate(Linear(LayerNorm(attended, block.ln_2, config_.layer_norm_eps),
                                           block.c_fc),
                                    config_.activation),
                           block.mlp_proj);
}

at::Tensor GPT2Model::RunAttention(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                                   ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const int64_t d = config_.hidden_size;

  // c_attn's output columns are q | k | v, each d wide.
  const at::Tensor qkv =
      Linear(LayerNorm(hidden, block.ln_1, config_.layer_norm_eps), block.c_attn);
  const at::Tensor query = SplitHeads(qkv.narrow(-1, 0, d), config_.num_heads);
  const at::Tensor key = SplitHeads(qkv.narrow(-1, d, d), config_.num_heads);
  const at::Tensor value = SplitHeads(qkv.narrow(-1, 2 * d, d), config_.num_heads);

  at::Tensor probs = AttentionProbs(layer, query, key, key_mask);
  observer.OnAttention(layer, query, key, probs);
  at::Tensor context = MergeHeads(at::matmul(probs, value));
  probs.reset();
  return Linear(std::move(context), block.attn_proj) + hidden;
}

void GPT2Model::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                        ForwardObserver& observer) const {
  const at::Tensor positions = at::arange(input_ids.size(1), input_ids.options());
  at::Tensor hidden = EmbeddingRows(wte_, input_ids) + EmbeddingRows(wpe_, positions).unsqueeze(0);
  observer.OnHiddenState(0, hidden);
  const at::Tensor key_mask = CausalKeyMask(valid);
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    hidden = RunBlock(layer, hidden, key_mask, observer);
    if (layer + 1 < shape_.num_layers) observer.OnHiddenState(layer + 1, hidden);
  }
  observer.OnHiddenState(shape_.num_layers, LayerNorm(hidden, ln_f_, config_.layer_norm_eps));
}

}  // namespace anisoscope::analysis
