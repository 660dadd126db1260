#include "analysis/models/bert_model.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/config_reader.h"
#include "analysis/models/weight_lookup.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {

absl::StatusOr<BertConfig> BertConfig::FromConfig(const nlohmann::json& json,
                                                  const std::filesystem::path& file) {
  const ConfigReader reader(json, file);
  BertConfig config;
  ASSIGN_OR_RETURN(config.vocab_size, reader.PositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config.hidden_size, reader.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(config.num_layers, reader.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config.num_heads, reader.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(config.max_positions, reader.PositiveInt("max_position_embeddings"));
  ASSIGN_OR_RETURN(config.type_vocab_size, reader.PositiveInt("type_vocab_size", 2));
  ASSIGN_OR_RETURN(config.layer_norm_eps, reader.PositiveNumber("layer_norm_eps", 1e-12));
  ASSIGN_OR_RETURN(config.hidden_act, ReadActivation(reader, "hidden_act", "gelu"));
  ASSIGN_OR_RETURN(std::string position_type, reader.String("position_embedding_type", "absolute"));
  if (config.hidden_size % config.num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Describe("hidden_size"), " (", config.hidden_size,
                     ") is not a multiple of num_attention_heads (", config.num_heads, ")"));
  }
  if (position_type != "absolute") {
    return absl::InvalidArgumentError(absl::StrCat(reader.Describe("position_embedding_type"), " '",
                                                   position_type, "' is not supported (absolute)"));
  }
  return config;
}

ModelShape BertConfig::Shape() const {
  return MakeModelShape(kBertFamily, num_layers, num_heads, hidden_size, vocab_size, max_positions,
                        /*causal=*/false);
}

BertModel::BertModel(BertConfig config, at::Device device)
    : config_(std::move(config)), shape_(config_.Shape()), device_(device) {}

absl::StatusOr<ModelShape> BertModel::ReadShape(const nlohmann::json& config,
                                                const std::filesystem::path& file) {
  ASSIGN_OR_RETURN(const BertConfig read, BertConfig::FromConfig(config, file));
  return read.Shape();
}

absl::StatusOr<std::unique_ptr<BertModel>> BertModel::Create(const Checkpoint& checkpoint,
                                                             const at::Device& device,
                                                             at::ScalarType dtype) {
  ASSIGN_OR_RETURN(BertConfig config,
                   BertConfig::FromConfig(checkpoint.config(), checkpoint.config_path()));
  std::unique_ptr<BertModel> model(new BertModel(config, device));
  const WeightLookup weights(checkpoint, {"", "bert."},
                             at::TensorOptions().device(device).dtype(dtype));
  const int64_t d = config.hidden_size;
  const int64_t inner = config.intermediate_size;

  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return LoadLinear(weights, name, out, in);
  };
  auto layer_norm = [&](const std::string& name) { return LoadLayerNorm(weights, name, d); };

  ASSIGN_OR_RETURN(model->word_embeddings_,
                   LoadEmbedding(weights, "embeddings.word_embeddings", config.vocab_size, d));
  ASSIGN_OR_RETURN(
      model->position_embeddings_,
      LoadEmbedding(weights, "embeddings.position_embeddings", config.max_positions, d));
  ASSIGN_OR_RETURN(
      model->token_type_embeddings_,
      LoadEmbedding(weights, "embeddings.token_type_embeddings", config.type_vocab_size, d));
  ASSIGN_OR_RETURN(model->embedding_norm_, layer_norm("embeddings.LayerNorm"));

  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string prefix = absl::StrCat("encoder.layer.", l, ".");
    Block block;
    ASSIGN_OR_RETURN(block.query, linear(prefix + "attention.self.query", d, d));
    ASSIGN_OR_RETURN(block.key, linear(prefix + "attention.self.key", d, d));
    ASSIGN_OR_RETURN(block.value, linear(prefix + "attention.self.value", d, d));
    ASSIGN_OR_RETURN(block.attention_output, linear(prefix + "attention.output.dense", d, d));
    ASSIGN_OR_RETURN(block.attention_norm, layer_norm(prefix + "attention.output.LayerNorm"));
    ASSIGN_OR_RETURN(block.intermediate, linear(prefix + "intermediate.dense", inner, d));
    ASSIGN_OR_RETURN(block.output, linear(prefix + "output.dense", d, inner));
    ASSIGN_OR_RETURN(block.output_norm, layer_norm(prefix + "output.LayerNorm"));
    model->blocks_.push_back(std::move(block));
  }
  return model;
}

at::Tensor BertModel::Embed(const at::Tensor& input_ids) const {
  const int64_t length = input_ids.size(1);
  at::Tensor positions = at::arange(length, input_ids.options());
  const at::Tensor token_type = at::zeros({1}, input_ids.options());  // every token: type 0
  at::Tensor embedded = EmbeddingRows(word_embeddings_, input_ids) +
                        EmbeddingRows(position_embeddings_, positions).unsqueeze(0) +
                        EmbeddingRows(token_type_embeddings_, token_type);
  return LayerNorm(embedded, embedding_norm_, config_.layer_norm_eps);
}

at::Tensor BertModel::RunBlock(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                               ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const at::Tensor attended = RunAttention(layer, hidden, key_mask, observer);
  return LayerNorm(
      Linear(Activate(Linear(attended, block.intermediate), config_.hidden_act), block.output) +
          attended,
      block.output_norm, config_.layer_norm_eps);
}

at::Tensor BertModel::RunAttention(int layer, const at::Tensor& hidden, const at::Tensor& key_mask,
                                   ForwardObserver& observer) const {
  const Block& block = blocks_[layer];
  const int64_t heads = config_.num_heads;
  const int64_t head_dim = config_.hidden_size / heads;
  const at::Tensor query = SplitHeads(Linear(hidden, block.query), heads);
  const at::Tensor key = SplitHeads(Linear(hidden, block.key), heads);
  const at::Tensor value = SplitHeads(Linear(hidden, block.value), heads);

  // Every sample has at least one valid key, so no row is fully masked.
  at::Tensor probs =
      MaskedSoftmax(AttentionScores(query, key).div_(std::sqrt(double(head_dim))), key_mask);
  observer.OnAttention(layer, query, key, probs);

  at::Tensor context = MergeHeads(at::matmul(probs, value));
  probs.reset();
  return LayerNorm(Linear(std::move(context), block.attention_output) + hidden,
                   block.attention_norm, config_.layer_norm_eps);
}

void BertModel::Forward(const at::Tensor& input_ids, const at::Tensor& valid,
                        ForwardObserver& observer) const {
  at::Tensor hidden = Embed(input_ids);
  observer.OnHiddenState(0, hidden);
  const at::Tensor key_mask = PaddingKeyMask(valid);
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    hidden = RunBlock(layer, hidden, key_mask, observer);
    observer.OnHiddenState(layer + 1, hidden);
  }
}

}  // namespace anisoscope::analysis
