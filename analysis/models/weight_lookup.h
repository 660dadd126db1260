// WeightLookup: finds a model's parameters in a Checkpoint by name, checks their shapes
// and converts them to the compute device and dtype. Errors name tensor and file.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/checkpoint.h"

namespace anisoscope::analysis {

class WeightLookup {
 public:
  // `prefixes` are tried in order before each name, e.g. {"", "bert."}. The checkpoint
  // must outlive the lookup.
  WeightLookup(const Checkpoint& checkpoint, std::vector<std::string> prefixes,
               at::TensorOptions target);

  // The tensor `name` (under any prefix; "LayerNorm.weight"/".bias" also match the legacy
  // "LayerNorm.gamma"/".beta") with exactly `shape`, converted to the target options.
  absl::StatusOr<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  const StoredTensor* FindAny(const std::string& name, std::string* found_name) const;

  const Checkpoint& checkpoint_;
  std::vector<std::string> prefixes_;
  at::TensorOptions target_;
};

}  // namespace anisoscope::analysis
