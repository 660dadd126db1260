#include "analysis/checkpoint/checkpoint.h"

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/safetensors_reader.h"
#include "analysis/checkpoint/torch_zip_reader.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

constexpr char kSafetensors[] = "model.safetensors";
constexpr char kSafetensorsIndex[] = "model.safetensors.index.json";
constexpr char kBin[] = "pytorch_model.bin";
constexpr char kBinIndex[] = "pytorch_model.bin.index.json";

enum class Format { kSafetensors, kTorchZip };

bool IsRegularFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Reads and parses a JSON file; NOT_FOUND when absent, INVALID_ARGUMENT when malformed.
absl::StatusOr<nlohmann::json> ReadJsonFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path.string(), " not found"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": invalid JSON: ", e.what()));
  }
}

// Reads one weight file of `format`.
absl::StatusOr<NamedTensors> ReadWeights(const fs::path& file, Format format) {
  return format == Format::kSafetensors ? ReadSafetensors(file) : ReadTorchZipStateDict(file);
}

// The shard files named by an index's weight_map, in order of first use, and the map itself.
struct ShardIndex {
  std::vector<std::string> shards;
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
};

absl::StatusOr<ShardIndex> ReadShardIndex(const fs::path& index_path) {
  ASSIGN_OR_RETURN(nlohmann::json index, ReadJsonFile(index_path));
  const std::string label = index_path.string();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": no 'weight_map' object"));
  }
  ShardIndex result;
  std::set<std::string> seen;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": weight_map entry '", name, "' is not a file name"));
    }
    const std::string file = shard.get<std::string>();
    // Shards must be plain file names inside the checkpoint directory.
    const fs::path as_path(file);
    if (file.empty() || as_path.has_parent_path() || file == "." || file == "..") {
      return absl::InvalidArgumentError(absl::StrCat(label, ": weight_map entry '", name,
                                                     "' names '", file,
                                                     "', not a file in the directory"));
    }
    if (seen.insert(file).second) result.shards.push_back(file);
    result.weight_map[name] = file;
  }
  if (result.shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": 'weight_map' is empty"));
  }
  return result;
}

}  // namespace

absl::StatusOr<nlohmann::json> ReadConfig(const fs::path& dir) {
  ASSIGN_OR_RETURN(nlohmann::json config, ReadJsonFile(dir / "config.json"));
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / "config.json").string(), ": not a JSON object"));
  }
  return config;
}

const StoredTensor* Checkpoint::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<Checkpoint> Checkpoint::Load(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", dir.string(), " not found"));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", dir.string(), " is not a directory"));
  }
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  ASSIGN_OR_RETURN(checkpoint.config_, ReadConfig(dir));

  // Single files before indexes; safetensors before torch zip.
  std::vector<fs::path> files;
  Format format = Format::kSafetensors;
  std::optional<ShardIndex> index;
  fs::path index_path;
  if (IsRegularFile(dir / kSafetensors)) {
    files = {dir / kSafetensors};
    format = Format::kSafetensors;
  } else if (IsRegularFile(dir / kSafetensorsIndex)) {
    index_path = dir / kSafetensorsIndex;
    format = Format::kSafetensors;
  } else if (IsRegularFile(dir / kBin)) {
    files = {dir / kBin};
    format = Format::kTorchZip;
  } else if (IsRegularFile(dir / kBinIndex)) {
    index_path = dir / kBinIndex;
    format = Format::kTorchZip;
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir.string(), ": no weights found (looked for ",
                     absl::StrJoin({kSafetensors, kSafetensorsIndex, kBin, kBinIndex}, ", "), ")"));
  }
  if (!index_path.empty()) {
    ASSIGN_OR_RETURN(index, ReadShardIndex(index_path));
    for (const std::string& shard : index->shards) {
      if (!IsRegularFile(dir / shard)) {
        std::string example;
        for (const auto& [name, file] : index->weight_map) {
          if (file == shard) {
            example = name;
            break;
          }
        }
        return absl::NotFoundError(absl::StrCat(index_path.string(), ": shard '", shard,
                                                "' (holding '", example, "') not found in ",
                                                dir.string()));
      }
      files.push_back(dir / shard);
    }
  }

  for (const fs::path& file : files) {
    ASSIGN_OR_RETURN(NamedTensors tensors, ReadWeights(file, format));
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
    const uintmax_t size = fs::file_size(file, ec);
    if (!ec) checkpoint.size_bytes_ += size;
  }
  if (index.has_value()) {
    for (const auto& [name, shard] : index->weight_map) {
      const StoredTensor* stored = checkpoint.Find(name);
      if (stored == nullptr || stored->file.filename() != shard) {
        return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": tensor '", name,
                                                       "' is mapped to '", shard,
                                                       "', which does not hold it"));
      }
    }
  }
  return checkpoint;
}

}  // namespace anisoscope::analysis
