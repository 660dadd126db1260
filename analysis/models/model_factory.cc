#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis/models/bert_model.h"
#include "analysis/models/gpt2_model.h"
#include "analysis/models/gpt_neox_model.h"
#include "analysis/models/llama_model.h"
#include "analysis/models/transformer_model.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

constexpr char kSupportedFamilies[] =
    "bert (Bert*), gpt_neox (GPTNeoX*), gpt2 (GPT2*), llama (Llama*, Mistral*, Qwen2*; "
    "model_type llama, mistral, qwen2), olmo2 (Olmo2*), by config.json model_type or "
    "architectures";

// The family named by model_type, else by the first architectures entry.
std::string FamilyOf(const nlohmann::json& config) {
  if (config.contains("model_type") && config["model_type"].is_string()) {
    const std::string model_type = config["model_type"].get<std::string>();
    for (const char* llama_shaped : {"llama", "mistral", "qwen2"}) {
      if (model_type == llama_shaped) return "llama";
    }
    return model_type;
  }
  if (config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    const std::string architecture = config["architectures"][0].get<std::string>();
    if (absl::StartsWith(architecture, "Bert")) return "bert";
    if (absl::StartsWith(architecture, "GPTNeoX")) return "gpt_neox";
    if (absl::StartsWith(architecture, "GPT2")) return "gpt2";
    if (absl::StartsWith(architecture, "Olmo2")) return "olmo2";
    for (const char* llama_shaped : {"Llama", "Mistral", "Qwen2"}) {
      if (absl::StartsWith(architecture, llama_shaped)) return "llama";
    }
    return architecture;
  }
  return "";
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
  const std::string family = FamilyOf(checkpoint.config());
  if (family == "bert") {
    ASSIGN_OR_RETURN(std::unique_ptr<BertModel> model,
                     BertModel::Create(checkpoint, device, dtype));
    return std::unique_ptr<TransformerModel>(std::move(model));
  }
  if (family == "gpt_neox") {
    ASSIGN_OR_RETURN(std::unique_ptr<GPTNeoXModel> model,
                     GPTNeoXModel::Create(checkpoint, device, dtype));
    return std::unique_ptr<TransformerModel>(std::move(model));
  }
  if (family == "gpt2") {
    ASSIGN_OR_RETURN(std::unique_ptr<GPT2Model> model,
                     GPT2Model::Create(checkpoint, device, dtype));
    return std::unique_ptr<TransformerModel>(std::move(model));
  }
  if (family == "llama" || family == "olmo2") {
    ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                     LlamaModel::Create(checkpoint, family, device, dtype));
    return std::unique_ptr<TransformerModel>(std::move(model));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(checkpoint.config_path().string(), ": model family '",
                   family.empty() ? "(none: no model_type or architectures)" : family,
                   "' is not supported; supported families: ", kSupportedFamilies));
}

}  // namespace anisoscope::analysis
