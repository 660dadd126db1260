// WeightLookup: finds a model's parameters in a Checkpoint by name, checks their shapes
// and puts them on the compute device. Errors name tensor and file.
//
// On the CPU a parameter stays as stored: a view of the mapped weight file, never a copy;
// model_layers.h converts it to the compute dtype where it is used, one projection at a
// time, so float16 weights cost their file's size and not twice it. On another device it
// is copied there in the compute dtype once.
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
  // "LayerNorm.gamma"/".beta") with exactly `shape`, on the target device (see above).
  absl::StatusOr<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape) const;

  // The dtype the model computes in (the target's).
  at::ScalarType compute_dtype() const { return at::typeMetaToScalarType(target_.dtype()); }

 private:
  const StoredTensor* FindAny(const std::string& name, std::string* found_name) const;

  const Checkpoint& checkpoint_;
  std::vector<std::string> prefixes_;
  at::TensorOptions target_;
};

}  // namespace anisoscope::analysis
