// The rotary embedding's inverse frequencies of a LLaMA-style config.json, as Hugging Face's
// modeling_rope_utils computes them: base rope_theta over the whole head, and the
// rope_scaling types whose frequencies do not depend on the probe: linear, llama3, and
// dynamic (NTK), which changes nothing for sequences within max_position_embeddings (the
// probe is checked against it). Any other type is refused naming it. No LibTorch.
//
// Reading the settings allocates nothing that depends on a config number; the table itself
// is computed only from a head size the weights have confirmed (LlamaConfig::Rotary).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/models/config_reader.h"

namespace anisoscope::analysis {

// The validated rotary settings: theta and the scaling.
struct RotaryScaling {
  enum class Type { kDefault, kLinear, kLlama3 };  // "dynamic" reads as kDefault
  Type type = Type::kDefault;
  double theta = 10000;
  double factor = 1;                     // linear, llama3
  double low_freq_factor = 1;            // llama3
  double high_freq_factor = 4;           // llama3
  double original_max_positions = 8192;  // llama3

  // inv_freq[i] for i < rotary_dims / 2: theta^(-2i / rotary_dims), scaled.
  std::vector<double> InverseFrequencies(int64_t rotary_dims) const;
};

// Reads rope_theta and rope_scaling (or transformers 5's rope_parameters). Errors name the
// file and the field.
absl::StatusOr<RotaryScaling> ReadRotaryScaling(const ConfigReader& reader,
                                                const nlohmann::json& config);

}  // namespace anisoscope::analysis
