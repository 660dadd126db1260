#include "analysis/models/olmo2_model.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr double kDefaultRmsNormEps = 1e-5;  // transformers' Olmo2Config

}  // namespace

Olmo2Model::Olmo2Model(LlamaConfig config, at::Device device)
    : config_(std::move(config)), shape_(config_.Shape(kOlmo2Family)), device_(device) {}

absl::StatusOr<ModelShape> Olmo2Model::ReadShape(const nlohmann::json& config,
                                                 const std::filesystem::path& file) {
  ASSIGN_OR_RETURN(const LlamaConfig read,
                   LlamaConfig::FromConfig(config, file, kDefaultRmsNormEps));
  return read.Shape(kOlmo2Family);
}

absl::StatusOr<std::unique_ptr<Olmo2Model>> Olmo2Model::Create(const Checkpoint& checkpoint,
                                                               const at::Device& device,
                                                               at::ScalarType dtype) {
  ASSIGN_OR_RETURN(
      LlamaConfig config,
      LlamaConfig::FromConfig(checkpoint.config(), checkpoint.config_path(), kDefaultRmsNormEps));
  std::unique_ptr<Olmo2Model> model(new Olmo2Model(config, device));
  const WeightLookup weights(checkpoint, {"model.", ""},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  auto gain = [&](const std::string& name, int64_t size) {
    return weights.Get(name + ".weight", {size});
  };

  ASSIGN_OR_RETURN(model->embed_tokens_,
                   LoadEmbedding(weights, "embed_tokens", config.vocab_size, d));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    const std::string attention = prefix + "self_attn.";
    Block block;
    ASSIGN_OR_RETURN(block.post_attention_norm, gain(prefix + "post_attention_layernorm", d));
    ASSIGN_OR_RETURN(block.post_feedforward_norm, gain(prefix + "post_feedforward_layernorm", d));
    ASSIGN_OR_RETURN(block.q_norm, gain(attention + "q_norm", config.num_heads * config.head_dim));
    ASSIGN_OR_RETURN(block.k_norm,
                     gain(attention + "k_norm", config.num_kv_heads * config.head_dim));
    ASSIGN_OR_RETURN(block.attention, LlamaAttention::Load(weights, attention, config));
    ASSIGN_OR_RETURN(block.mlp, SwiGluMlp::Load(weights, prefix + "mlp.", config));
    model->blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model->final_norm_, gain("norm", d));
  return model;
}

at::Tensor Olmo2Model::RunAttention(int layer, const at::Tensor& x, const at::Tensor& key_mask,
                                    const RotaryTables& rotary, ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const double eps = config_.rms_norm_eps;
  return block.attention.Attend(layer, x, RmsNorm(block.attention.Query(x), block.q_norm, eps),
                                RmsNorm(block.attention.Key(x), block.k_norm, eps), config_,
                                key_mask, rotary, observer);
}

void Olmo2Model::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                         ForwardObserver& observer) const {
  at::Tensor hidden = EmbeddingRows(embed_tokens_, input_ids);
  observer.OnHiddenState(0, hidden);
  const RotaryTables rotary = config_.Rotary(input_ids.size(1), device_, hidden.scalar_type());
  const at::Tensor key_mask = CausalKeyMask(valid);
  const double eps = config_.rms_norm_eps;
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    const Block& block = blocks_[layer];
    hidden = hidden + RmsNorm(RunAttention(layer, hidden, key_mask, rotary, observer),
                              block.post_attention_norm, eps);
    hidden = hidden +
             RmsNorm(block.mlp.Run(hidden, config_.hidden_act), block.post_feedforward_norm, eps);
    if (layer + 1 < shape_.num_layers) observer.OnHiddenState(layer + 1, hidden);
  }
  observer.OnHiddenState(shape_.num_layers, RmsNorm(hidden, final_norm_, eps));
}

}  // namespace anisoscope::analysis
