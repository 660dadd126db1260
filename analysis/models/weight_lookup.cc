#include "analysis/models/weight_lookup.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace anisoscope::analysis {
namespace {

// Legacy TF-converted checkpoints name LayerNorm parameters gamma and beta.
std::vector<std::string> Aliases(const std::string& name) {
  std::vector<std::string> names = {name};
  absl::string_view stem = name;
  if (absl::ConsumeSuffix(&stem, "LayerNorm.weight")) {
    names.push_back(absl::StrCat(stem, "LayerNorm.gamma"));
  } else if (absl::ConsumeSuffix(&stem, "LayerNorm.bias")) {
    names.push_back(absl::StrCat(stem, "LayerNorm.beta"));
  }
  return names;
}

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

WeightLookup::WeightLookup(const Checkpoint& checkpoint, std::vector<std::string> prefixes,
                           at::TensorOptions target)
    : checkpoint_(checkpoint), prefixes_(std::move(prefixes)), target_(target) {}

const StoredTensor* WeightLookup::FindAny(const std::string& name, std::string* found_name) const {
  for (const std::string& alias : Aliases(name)) {
    for (const std::string& prefix : prefixes_) {
      const std::string full = prefix + alias;
      if (const StoredTensor* stored = checkpoint_.Find(full)) {
        *found_name = full;
        return stored;
      }
    }
  }
  return nullptr;
}

absl::StatusOr<at::Tensor> WeightLookup::Get(const std::string& name,
                                             const std::vector<int64_t>& shape) const {
  std::string found_name;
  const StoredTensor* stored = FindAny(name, &found_name);
  if (stored == nullptr) {
    std::vector<std::string> files;
    for (const auto& file : checkpoint_.weight_files()) files.push_back(file.string());
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "' is missing from ", absl::StrJoin(files, ", ")));
  }
  if (stored->tensor.sizes() != at::IntArrayRef(shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", found_name, "' in ", stored->file.string(), " has shape ",
                     ShapeString(stored->tensor.sizes()), ", expected ", ShapeString(shape),
                     " from ", checkpoint_.config_path().string()));
  }
  if (!stored->tensor.is_floating_point()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", found_name, "' in ", stored->file.string(), " is not floating point"));
  }
  const at::Tensor tensor = stored->Aligned();
  if (target_.device().is_cpu()) return tensor.contiguous();
  return tensor.to(target_).contiguous();
}

}  // namespace anisoscope::analysis
