#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/models/bert_model.h"
#include "analysis/models/gpt2_model.h"
#include "analysis/models/gpt_neox_model.h"
#include "analysis/models/llama_model.h"
#include "analysis/models/model_shape.h"
#include "analysis/models/olmo2_model.h"
#include "analysis/models/transformer_model.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

using ModelFactory = absl::StatusOr<std::unique_ptr<TransformerModel>> (*)(
    const Checkpoint& checkpoint, const at::Device& device, at::ScalarType dtype);
using ShapeReader = absl::StatusOr<ModelShape> (*)(const nlohmann::json& config,
                                                   const std::filesystem::path& file);

template <typename Model>
absl::StatusOr<std::unique_ptr<TransformerModel>> Create(const Checkpoint& checkpoint,
                                                         const at::Device& device,
                                                         at::ScalarType dtype) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(checkpoint, device, dtype));
  return std::unique_ptr<TransformerModel>(std::move(model));
}

// A model family: the name the engine knows it by, how config.json names it, and its model.
struct ModelFamily {
  const char* name;  // ModelShape::family, one of ModelFamilies() (model_shape.h)
  // config.json model_type values of the family (the first is its own name).
  std::vector<const char*> model_types;
  // Prefixes of config.json's architectures[0] (a config without model_type).
  std::vector<const char*> architectures;
  ModelFactory create;
  ShapeReader read_shape;  // the shape `create` gives, from config.json alone
};

template <typename Model>
ModelFamily Family(const char* name, std::vector<const char*> model_types,
                   std::vector<const char*> architectures) {
  return {name, std::move(model_types), std::move(architectures), &Create<Model>,
          &Model::ReadShape};
}

// The one table of supported families: adding one is one row (and its name in
// model_shape.h).
const std::vector<ModelFamily>& Families() {
  static const auto* const families = new std::vector<ModelFamily>{
      Family<BertModel>(kBertFamily, {"bert"}, {"Bert"}),
      Family<GPTNeoXModel>(kGptNeoXFamily, {"gpt_neox"}, {"GPTNeoX"}),
      Family<GPT2Model>(kGpt2Family, {"gpt2"}, {"GPT2"}),
      Family<LlamaModel>(kLlamaFamily, {"llama", "mistral", "qwen2"},
                         {"Llama", "Mistral", "Qwen2"}),
      Family<Olmo2Model>(kOlmo2Family, {"olmo2"}, {"Olmo2"}),
  };
  return *families;
}

// "bert (Bert*), ..., llama (Llama*, Mistral*, Qwen2*; model_type llama, mistral, qwen2),
// ..., by config.json model_type or architectures".
std::string SupportedFamilies() {
  std::string text;
  for (const ModelFamily& family : Families()) {
    if (!text.empty()) text += ", ";
    absl::StrAppend(&text, family.name, " (");
    absl::StrAppend(&text, absl::StrJoin(family.architectures, "*, "), "*");
    if (family.model_types.size() > 1) {
      absl::StrAppend(&text, "; model_type ", absl::StrJoin(family.model_types, ", "));
    }
    text += ")";
  }
  return absl::StrCat(text, ", by config.json model_type or architectures");
}

// The family named by model_type, else by the first architectures entry; the name found
// when no family has it (for the error), "" when the config names none.
std::string FamilyOf(const nlohmann::json& config) {
  if (config.contains("model_type") && config["model_type"].is_string()) {
    const std::string model_type = config["model_type"].get<std::string>();
    for (const ModelFamily& family : Families()) {
      for (const char* name : family.model_types) {
        if (model_type == name) return family.name;
      }
    }
    return model_type;
  }
  if (config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    const std::string architecture = config["architectures"][0].get<std::string>();
    for (const ModelFamily& family : Families()) {
      for (const char* prefix : family.architectures) {
        if (absl::StartsWith(architecture, prefix)) return family.name;
      }
    }
    return architecture;
  }
  return "";
}

// The family config.json names; INVALID_ARGUMENT listing the supported ones for any other.
absl::StatusOr<const ModelFamily*> FindFamily(const nlohmann::json& config,
                                              const std::filesystem::path& config_path) {
  const std::string family = FamilyOf(config);
  for (const ModelFamily& known : Families()) {
    if (family == known.name) return &known;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(config_path.string(), ": model family '",
                   family.empty() ? "(none: no model_type or architectures)" : family,
                   "' is not supported; supported families: ", SupportedFamilies()));
}

}  // namespace

absl::StatusOr<at::ScalarType> ParseDtype(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "float16") return at::kHalf;
  if (dtype == "bfloat16") return at::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", dtype, "' is not one of float32, float16, bfloat16"));
}

absl::StatusOr<std::unique_ptr<TransformerModel>> CreateModel(const Checkpoint& checkpoint,
                                                              const ModelOptions& options) {
  ASSIGN_OR_RETURN(at::ScalarType dtype, ParseDtype(options.dtype));
  const at::Device device(options.device);
  ASSIGN_OR_RETURN(const ModelFamily* family,
                   FindFamily(checkpoint.config(), checkpoint.config_path()));
  return family->create(checkpoint, device, dtype);
}

absl::StatusOr<ModelShape> ReadModelShape(const nlohmann::json& config,
                                          const std::filesystem::path& config_path) {
  ASSIGN_OR_RETURN(const ModelFamily* family, FindFamily(config, config_path));
  return family->read_shape(config, config_path);
}

}  // namespace anisoscope::analysis
