// Checkpoint: one Hugging Face model directory loaded into CPU tensors.
//
// Reads config.json and the weights: model.safetensors (mmap, zero-copy), pytorch_model.bin
// (torch.save zip; the pickle is interpreted, never executed), or a sharded set described
// by model.safetensors.index.json / pytorch_model.bin.index.json. Tensors keep their stored
// dtype (F32, F16, BF16); models convert them. Misaligned tensors are copied only when used.
// Immutable after Load; thread-compatible.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

// A tensor and the weight file it came from (for error messages).
struct StoredTensor {
  // A view of the mapped file; its address may be misaligned for its dtype (a file whose
  // header length or offsets are not multiples of it): read it through Aligned().
  at::Tensor tensor;
  std::filesystem::path file;

  // `tensor` where its data is aligned for its dtype; otherwise a copy of it, made here, on
  // use, so that a misaligned tensor costs memory only when a model reads it (once), never
  // at load. Allocates only in that case; thread-safe.
  at::Tensor Aligned() const;
};

class Checkpoint {
 public:
  // Loads `dir`, every file opened through `gate`. Errors name the file (and the field or
  // tensor) that is wrong: INVALID_ARGUMENT for malformed content, NOT_FOUND when no weights
  // exist, the gate's error for a file it refuses.
  static absl::StatusOr<Checkpoint> Load(const std::filesystem::path& dir, const FileGate& gate);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path config_path() const { return dir_ / "config.json"; }
  const nlohmann::json& config() const { return config_; }

  // The tensor stored under exactly `name`, or nullptr.
  const StoredTensor* Find(const std::string& name) const;
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }

  // Weight files read, in load order, and their total size in bytes.
  const std::vector<std::filesystem::path>& weight_files() const { return weight_files_; }
  uint64_t size_bytes() const { return size_bytes_; }

 private:
  std::filesystem::path dir_;
  nlohmann::json config_;
  std::map<std::string, StoredTensor> tensors_;
  std::vector<std::filesystem::path> weight_files_;
  uint64_t size_bytes_ = 0;
};

// Reads and parses `dir`/config.json through `gate`; INVALID_ARGUMENT names the file on
// malformed JSON.
absl::StatusOr<nlohmann::json> ReadConfig(const std::filesystem::path& dir, const FileGate& gate);

}  // namespace anisoscope::analysis
