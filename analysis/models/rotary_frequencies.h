// The rotary embedding's inverse frequencies of a LLaMA-style config.json, as Hugging Face's
// modeling_rope_utils computes them: base rope_theta over the whole head, and the
// rope_scaling types whose frequencies do not depend on the probe: linear, llama3, and
// dynamic (NTK), which changes nothing for sequences within max_position_embeddings (the
// probe is checked against it). Any other type is refused naming it. No LibTorch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/models/config_reader.h"

namespace anisoscope::analysis {

// inv_freq[i] for i < rotary_dims / 2: theta^(-2i / rotary_dims), scaled by rope_scaling
// (or transformers 5's rope_parameters). Errors name the file and the field.
absl::StatusOr<std::vector<double>> RotaryInverseFrequencies(const ConfigReader& reader,
                                                             const nlohmann::json& config,
                                                             int64_t rotary_dims);

}  // namespace anisoscope::analysis
