#include "analysis/models/llama_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/config_reader.h"
#include "analysis/models/rotary_frequencies.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// A head's K (or V) [B, H_kv, T, d_h] repeated for each of its query heads: query head h
// uses key head h / (H / H_kv), as HF's repeat_kv.
at::Tensor RepeatKeyHeads(const at::Tensor& x, int64_t query_heads) {
  const int64_t repeats = query_heads / x.size(1);
  return repeats == 1 ? x : x.repeat_interleave(repeats, /*dim=*/1);
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfig::FromCheckpoint(const Checkpoint& checkpoint,
                                                        const std::string& family) {
  const std::filesystem::path file = checkpoint.config_path();
  const nlohmann::json& json = checkpoint.config();
  const ConfigReader reader(json, file);
  LlamaConfig config;
  config.family = family;
  ASSIGN_OR_RETURN(config.vocab_size, reader.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(config.num_layers, reader.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config.num_heads, reader.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(config.num_kv_heads,
                   reader.PositiveInt("num_key_value_heads", config.num_heads));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(config.max_positions, reader.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(config.rms_norm_eps,
                   reader.PositiveNumber("rms_norm_eps", family == "olmo2" ? 1e-5 : 1e-6));
  ASSIGN_OR_RETURN(config.hidden_act, ReadActivation(reader, "hidden_act", "silu"));
  ASSIGN_OR_RETURN(const bool attention_bias, reader.Bool("attention_bias", false));
  std::string model_type;  // the family may have come from architectures alone
  if (reader.IsSet("model_type")) {
    ASSIGN_OR_RETURN(model_type, reader.String("model_type", ""));
  }
  config.qkv_bias = attention_bias || model_type == "qwen2";
  config.output_bias = attention_bias;
  ASSIGN_OR_RETURN(config.mlp_bias, reader.Bool("mlp_bias", false));
  if (reader.IsSet("head_dim")) {
    ASSIGN_OR_RETURN(config.head_dim, reader.PositiveInt("head_dim"));
  } else if (config.hidden_size % config.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(reader.Describe("hidden_size"), " (",
                                                   config.hidden_size,
                                                   ") is not a multiple of num_attention_heads (",
                                                   config.num_heads, ") and there is no head_dim"));
  } else {
    config.head_dim = config.hidden_size / config.num_heads;
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("num_key_value_heads"), " (", config.num_kv_heads,
                     ") does not divide num_attention_heads (", config.num_heads, ")"));
  }
  if (config.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("head_dim"),
                     ": the rotary embedding needs an even head size, not ", config.head_dim));
  }
  // A sliding window shorter than the model's length would change attention for longer
  // probes: the window becomes the longest probe accepted.
  ASSIGN_OR_RETURN(const bool use_sliding_window, reader.Bool("use_sliding_window", false));
  const bool windowed = model_type == "mistral" || (model_type == "qwen2" && use_sliding_window);
  if (windowed && reader.IsSet("sliding_window")) {
    ASSIGN_OR_RETURN(const int64_t window, reader.PositiveInt("sliding_window"));
    if (window < config.max_positions) {
      config.max_positions = window;
      config.max_positions_key = "sliding_window";
    }
  }
  ASSIGN_OR_RETURN(config.inv_freq, RotaryInverseFrequencies(reader, json, config.head_dim));
  return config;
}

LlamaModel::LlamaModel(LlamaConfig config, at::Device device)
    : config_(std::move(config)),
      shape_(MakeModelShape(config_.family, config_.num_layers, config_.num_heads,
                            config_.hidden_size, config_.vocab_size, config_.max_positions,
                            /*causal=*/true)),
      device_(device) {
  shape_.head_dim = static_cast<int>(config_.head_dim);
  shape_.max_positions_key = config_.max_positions_key;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const Checkpoint& checkpoint,
                                                               const std::string& family,
                                                               const at::Device& device,
                                                               at::ScalarType dtype) {
  ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::FromCheckpoint(checkpoint, family));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, device));
  const WeightLookup weights(checkpoint, {"model.", ""},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  const int64_t q_out = config.num_heads * config.head_dim;
  const int64_t kv_out = config.num_kv_heads * config.head_dim;
  const int64_t inner = config.intermediate_size;
  auto gain = [&](const std::string& name, int64_t size) {
    return weights.Get(name + ".weight", {size});
  };
  const bool olmo2 = family == "olmo2";

  ASSIGN_OR_RETURN(model->embed_tokens_,
                   LoadEmbedding(weights, "embed_tokens", config.vocab_size, d));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    const std::string attention = prefix + "self_attn.";
    Block block;
    ASSIGN_OR_RETURN(block.attention_norm,
                     gain(prefix + (olmo2 ? "post_attention_layernorm" : "input_layernorm"), d));
    ASSIGN_OR_RETURN(
        block.mlp_norm,
        gain(prefix + (olmo2 ? "post_feedforward_layernorm" : "post_attention_layernorm"), d));
    if (olmo2) {
      ASSIGN_OR_RETURN(block.q_norm, gain(attention + "q_norm", q_out));
      ASSIGN_OR_RETURN(block.k_norm, gain(attention + "k_norm", kv_out));
    }
    ASSIGN_OR_RETURN(block.q_proj,
                     LoadLinear(weights, attention + "q_proj", q_out, d, config.qkv_bias));
    ASSIGN_OR_RETURN(block.k_proj,
                     LoadLinear(weights, attention + "k_proj", kv_out, d, config.qkv_bias));
    ASSIGN_OR_RETURN(block.v_proj,
                     LoadLinear(weights, attention + "v_proj", kv_out, d, config.qkv_bias));
    ASSIGN_OR_RETURN(block.o_proj,
                     LoadLinear(weights, attention + "o_proj", d, q_out, config.output_bias));
    const std::string mlp = prefix + "mlp.";
    ASSIGN_OR_RETURN(block.gate_proj,
                     LoadLinear(weights, mlp + "gate_proj", inner, d, config.mlp_bias));
    ASSIGN_OR_RETURN(block.up_proj,
                     LoadLinear(weights, mlp + "up_proj", inner, d, config.mlp_bias));
    ASSIGN_OR_RETURN(block.down_proj,
                     LoadLinear(weights, mlp + "down_proj", d, inner, config.mlp_bias));
    model->blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model->final_norm_, gain("norm", d));
  return model;
}

at::Tensor LlamaModel::RunMlp(const Block& block, const at::Tensor& x) const {
  at::Tensor gate = Activate(Linear(x, block.gate_proj), config_.hidden_act);
  return Linear(gate.mul_(Linear(x, block.up_proj)), block.down_proj);
}

at::Tensor LlamaModel::RunAttention(int layer, const at::Tensor& x, const at::Tensor& key_mask,
                                    const RotaryTables& rotary, ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const double eps = config_.rms_norm_eps;
  at::Tensor query = Linear(x, block.q_proj);
  at::Tensor key = Linear(x, block.k_proj);
  if (olmo2()) {
    query = RmsNorm(query, block.q_norm, eps);
    key = RmsNorm(key, block.k_norm, eps);
  }
  const int64_t heads = config_.num_heads;
  query = SplitHeads(query, heads);
  key = RepeatKeyHeads(SplitHeads(key, config_.num_kv_heads), heads);
  const at::Tensor value =
      RepeatKeyHeads(SplitHeads(Linear(x, block.v_proj), config_.num_kv_heads), heads);
  observer.OnPreRotary(layer, query, key);
  query = ApplyRotary(query, rotary);
  key = ApplyRotary(key, rotary);
  at::Tensor probs = MaskedSoftmax(
      AttentionScores(query, key).mul_(1.0 / std::sqrt(double(config_.head_dim))), key_mask);
  observer.OnAttention(layer, query, key, probs);
  at::Tensor context = MergeHeads(at::matmul(probs, value));
  probs.reset();
  return Linear(std::move(context), block.o_proj);
}

void LlamaModel::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                         ForwardObserver& observer) const {
  at::Tensor hidden = EmbeddingRows(embed_tokens_, input_ids);
  observer.OnHiddenState(0, hidden);

  // HF LlamaRotaryEmbedding: over the whole head, from the config's (scaled) frequencies.
  const RotaryTables rotary = MakeRotaryTables(
      at::tensor(config_.inv_freq, at::TensorOptions().dtype(at::kDouble)).to(device_, at::kFloat),
      input_ids.size(1), hidden.scalar_type());
  const at::Tensor key_mask = CausalKeyMask(valid);
  const double eps = config_.rms_norm_eps;
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    const Block& block = blocks_[layer];
    if (olmo2()) {
      hidden = hidden + RmsNorm(RunAttention(layer, hidden, key_mask, rotary, observer),
                                block.attention_norm, eps);
      hidden = hidden + RmsNorm(RunMlp(block, hidden), block.mlp_norm, eps);
    } else {
      hidden = hidden + RunAttention(layer, RmsNorm(hidden, block.attention_norm, eps), key_mask,
                                     rotary, observer);
      hidden = hidden + RunMlp(block, RmsNorm(hidden, block.mlp_norm, eps));
    }
    if (layer + 1 < shape_.num_layers) observer.OnHiddenState(layer + 1, hidden);
  }
  observer.OnHiddenState(shape_.num_layers, RmsNorm(hidden, final_norm_, eps));
}

}  // namespace anisoscope::analysis
