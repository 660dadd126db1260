// ModelShape: the dimensions of a loaded model, as the metrics and the server see them.
// Plain data, no LibTorch.
#pragma once

#include <cstdint>
#include <string>

namespace anisoscope::analysis {

struct ModelShape {
  std::string family;  // config.json model_type, e.g. "bert"
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
  bool causal = false;
};

}  // namespace anisoscope::analysis
