#include "analysis/models/llama_layers.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/config_reader.h"
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

absl::StatusOr<LlamaConfig> LlamaConfig::FromConfig(const nlohmann::json& json,
                                                    const std::filesystem::path& file,
                                                    double default_rms_norm_eps) {
  const ConfigReader reader(json, file);
  LlamaConfig config;
  ASSIGN_OR_RETURN(config.vocab_size, reader.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(config.num_layers, reader.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config.num_heads, reader.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(config.num_kv_heads,
                   reader.PositiveInt("num_key_value_heads", config.num_heads));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(config.max_positions, reader.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(config.rms_norm_eps,
                   reader.PositiveNumber("rms_norm_eps", default_rms_norm_eps));
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
  ASSIGN_OR_RETURN(config.rotary, ReadRotaryScaling(reader, json));
  return config;
}

ModelShape LlamaConfig::Shape(const std::string& family) const {
  ModelShape shape = MakeModelShape(family, num_layers, num_heads, hidden_size, vocab_size,
                                    max_positions, /*causal=*/true);
  shape.head_dim = static_cast<int>(head_dim);
  shape.max_positions_key = max_positions_key;
  return shape;
}

RotaryTables LlamaConfig::Rotary(int64_t length, const at::Device& device,
                                 at::ScalarType dtype) const {
  // HF LlamaRotaryEmbedding: over the whole head, from the config's (scaled) frequencies.
  return MakeRotaryTables(
      at::tensor(rotary.InverseFrequencies(head_dim), at::TensorOptions().dtype(at::kDouble))
          .to(device, at::kFloat),
      length, dtype);
}

absl::StatusOr<LlamaAttention> LlamaAttention::Load(const WeightLookup& weights,
                                                    const std::string& prefix,
                                                    const LlamaConfig& config) {
  const int64_t d = config.hidden_size;
  const int64_t q_out = config.num_heads * config.head_dim;
  const int64_t kv_out = config.num_kv_heads * config.head_dim;
  LlamaAttention attention;
  ASSIGN_OR_RETURN(attention.q_proj,
                   LoadLinear(weights, prefix + "q_proj", q_out, d, config.qkv_bias));
  ASSIGN_OR_RETURN(attention.k_proj,
                   LoadLinear(weights, prefix + "k_proj", kv_out, d, config.qkv_bias));
  ASSIGN_OR_RETURN(attention.v_proj,
                   LoadLinear(weights, prefix + "v_proj", kv_out, d, config.qkv_bias));
  ASSIGN_OR_RETURN(attention.o_proj,
                   LoadLinear(weights, prefix + "o_proj", d, q_out, config.output_bias));
  return attention;
}

at::Tensor LlamaAttention::Attend(int layer, const at::Tensor& x, at::Tensor query, at::Tensor key,
                                  const LlamaConfig& config, const at::Tensor& key_mask,
                                  const RotaryTables& rotary, ForwardObserver& observer) const {
  const int64_t heads = config.num_heads;
  query = SplitHeads(query, heads);
  key = RepeatKeyHeads(SplitHeads(key, config.num_kv_heads), heads);
  const at::Tensor value =
      RepeatKeyHeads(SplitHeads(Linear(x, v_proj), config.num_kv_heads), heads);
  observer.OnPreRotary(layer, query, key);
  query = ApplyRotary(query, rotary);
  key = ApplyRotary(key, rotary);
  at::Tensor probs = MaskedSoftmax(
      AttentionScores(query, key).mul_(1.0 / std::sqrt(double(config.head_dim))), key_mask);
  observer.OnAttention(layer, query, key, probs);
  at::Tensor context = MergeHeads(at::matmul(probs, value));
  probs.reset();
  return Linear(std::move(context), o_proj);
}

absl::StatusOr<SwiGluMlp> SwiGluMlp::Load(const WeightLookup& weights, const std::string& prefix,
                                          const LlamaConfig& config) {
  const int64_t d = config.hidden_size;
  const int64_t inner = config.intermediate_size;
  SwiGluMlp mlp;
  ASSIGN_OR_RETURN(mlp.gate_proj,
                   LoadLinear(weights, prefix + "gate_proj", inner, d, config.mlp_bias));
  ASSIGN_OR_RETURN(mlp.up_proj, LoadLinear(weights, prefix + "up_proj", inner, d, config.mlp_bias));
  ASSIGN_OR_RETURN(mlp.down_proj,
                   LoadLinear(weights, prefix + "down_proj", d, inner, config.mlp_bias));
  return mlp;
}

at::Tensor SwiGluMlp::Run(const at::Tensor& x, Activation activation) const {
  at::Tensor gate = Activate(Linear(x, gate_proj), activation);
  return Linear(gate.mul_(Linear(x, up_proj)), down_proj);
}

}  // namespace anisoscope::analysis
