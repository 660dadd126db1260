#include "analysis/models/llama_model.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr double kDefaultRmsNormEps = 1e-6;  // transformers' LlamaConfig

}  // namespace

LlamaModel::LlamaModel(LlamaConfig config, at::Device device)
    : config_(std::move(config)), shape_(config_.Shape(kLlamaFamily)), device_(device) {}

absl::StatusOr<ModelShape> LlamaModel::ReadShape(const nlohmann::json& config,
                                                 const std::filesystem::path& file) {
  ASSIGN_OR_RETURN(const LlamaConfig read,
                   LlamaConfig::FromConfig(config, file, kDefaultRmsNormEps));
  return read.Shape(kLlamaFamily);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const Checkpoint& checkpoint,
                                                               const at::Device& device,
                                                               at::ScalarType dtype) {
  ASSIGN_OR_RETURN(
      LlamaConfig config,
      LlamaConfig::FromConfig(checkpoint.config(), checkpoint.config_path(), kDefaultRmsNormEps));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, device));
  const WeightLookup weights(checkpoint, {"model.", ""},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  auto gain = [&](const std::string& name) { return weights.Get(name + ".weight", {d}); };

  ASSIGN_OR_RETURN(model->embed_tokens_,
                   LoadEmbedding(weights, "embed_tokens", config.vocab_size, d));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    Block block;
    ASSIGN_OR_RETURN(block.input_norm, gain(prefix + "input_layernorm"));
    ASSIGN_OR_RETURN(block.post_attention_norm, gain(prefix + "post_attention_layernorm"));
    ASSIGN_OR_RETURN(block.attention, LlamaAttention::Load(weights, prefix + "self_attn.", config));
    ASSIGN_OR_RETURN(block.mlp, SwiGluMlp::Load(weights, prefix + "mlp.", config));
    model->blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model->final_norm_, gain("norm"));
  return model;
}

at::Tensor LlamaModel::RunAttention(int layer, const at::Tensor& x, const at::Tensor& key_mask,
                                    const RotaryTables& rotary, ForwardObserver& observer) const {
  const LlamaAttention& attention = blocks_[layer].attention;
  return attention.Attend(layer, x, attention.Query(x), attention.Key(x), config_, key_mask, rotary,
                          observer);
}

void LlamaModel::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                         ForwardObserver& observer) const {
  at::Tensor hidden = EmbeddingRows(embed_tokens_, input_ids);
  observer.OnHiddenState(0, hidden);
  const RotaryTables rotary = config_.Rotary(input_ids.size(1), device_, hidden.scalar_type());
  const at::Tensor key_mask = CausalKeyMask(valid);
  const double eps = config_.rms_norm_eps;
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    const Block& block = blocks_[layer];
    hidden = hidden + RunAttention(layer, RmsNorm(hidden, block.input_norm, eps), key_mask, rotary,
                                   observer);
    hidden =
        hidden + block.mlp.Run(RmsNorm(hidden, block.post_attention_norm, eps), config_.hidden_act);
    if (layer + 1 < shape_.num_layers) observer.OnHiddenState(layer + 1, hidden);
  }
  observer.OnHiddenState(shape_.num_layers, RmsNorm(hidden, final_norm_, eps));
}

}  // namespace anisoscope::analysis
