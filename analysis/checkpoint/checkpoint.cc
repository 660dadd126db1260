#include "analysis/checkpoint/checkpoint.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/safetensors_reader.h"
#include "analysis/checkpoint/torch_zip_reader.h"
#include "analysis/checkpoint/weight_files.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

// Reads one weight file of `format`.
absl::StatusOr<NamedTensors> ReadWeights(const fs::path& file, WeightFormat format,
                                         const FileGate& gate) {
  return format == WeightFormat::kSafetensors ? ReadSafetensors(file, gate)
                                              : ReadTorchZipStateDict(file, gate);
}

}  // namespace

absl::StatusOr<nlohmann::json> ReadConfig(const fs::path& dir, const FileGate& gate) {
  ASSIGN_OR_RETURN(nlohmann::json config, ReadJsonFile(dir / "config.json", gate));
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / "config.json").string(), ": not a JSON object"));
  }
  return config;
}

at::Tensor StoredTensor::Aligned() const {
  if (!tensor.defined() || tensor.numel() == 0) return tensor;
  const auto address = reinterpret_cast<uintptr_t>(tensor.data_ptr());
  return address % tensor.element_size() == 0 ? tensor : tensor.clone();
}

const StoredTensor* Checkpoint::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<Checkpoint> Checkpoint::Load(const fs::path& dir, const FileGate& gate) {
  if (absl::Status status = gate.OpenDirectory(dir).status(); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("checkpoint: ", status.message()));
  }
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  ASSIGN_OR_RETURN(checkpoint.config_, ReadConfig(dir, gate));

  ASSIGN_OR_RETURN(const WeightFiles weights, FindWeightFiles(dir, gate));
  for (const fs::path& file : weights.files) {
    ASSIGN_OR_RETURN(NamedTensors tensors, ReadWeights(file, weights.format, gate));
    for (auto& [name, tensor] : tensors) {
      const auto [it, inserted] =
          checkpoint.tensors_.emplace(name, StoredTensor{std::move(tensor), file});
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is stored in both ",
                                                       it->second.file.string(), " and ",
                                                       file.string()));
      }
    }
    checkpoint.weight_files_.push_back(file);
    if (absl::StatusOr<uint64_t> size = gate.FileSize(file); size.ok()) {
      checkpoint.size_bytes_ += *size;
    }
  }
  if (weights.index.has_value()) {
    for (const auto& [name, shard] : weights.index->weight_map) {
      const StoredTensor* stored = checkpoint.Find(name);
      if (stored == nullptr || stored->file.filename() != shard) {
        return absl::InvalidArgumentError(absl::StrCat(weights.index_path.string(), ": tensor '",
                                                       name, "' is mapped to '", shard,
                                                       "', which does not hold it"));
      }
    }
  }
  return checkpoint;
}

}  // namespace anisoscope::analysis
