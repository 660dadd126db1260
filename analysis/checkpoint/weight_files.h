// Which files of a Hugging Face checkpoint directory hold its weights, and whether they are
// whole: model.safetensors, else model.safetensors.index.json and its shards, else
// pytorch_model.bin, else pytorch_model.bin.index.json and its shards. No LibTorch: the
// CLI-free parts of the server (following a run being written) use it as the loader does.
// Every file is opened through the FileGate given. Pure functions of the file system;
// thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

enum class WeightFormat { kSafetensors, kTorchZip };

// The shard files named by an index's weight_map, in order of first use, and the map itself.
struct ShardIndex {
  std::vector<std::string> shards;
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
};

struct WeightFiles {
  WeightFormat format = WeightFormat::kSafetensors;
  std::vector<std::filesystem::path> files;  // the single file, or the shards in index order
  std::filesystem::path index_path;          // empty for a single file
  std::optional<ShardIndex> index;
};

// Reads and parses a JSON file through `gate` (its error when it cannot be opened);
// INVALID_ARGUMENT naming the file and the byte when malformed, or when over 64 MiB.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::filesystem::path& path,
                                            const FileGate& gate);

// The weight files of `dir`. NOT_FOUND naming the names looked for when there are none, or
// naming the index and the shard when a shard is missing; INVALID_ARGUMENT for a malformed
// index (shards must be plain file names in `dir`).
absl::StatusOr<WeightFiles> FindWeightFiles(const std::filesystem::path& dir, const FileGate& gate);

// OK when `dir` holds a whole checkpoint, as Hugging Face writes one (config.json first,
// weights last): config.json parses, every weight file exists, each safetensors file is as
// long as its header says and each torch zip's central directory reads. Otherwise
// UNAVAILABLE saying what is not there yet (a checkpoint still being written). Reads the
// headers only.
absl::Status CheckCheckpointComplete(const std::filesystem::path& dir, const FileGate& gate);

}  // namespace anisoscope::analysis
