#include "analysis/checkpoint/weight_files.h"

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/mapped_file.h"
#include "analysis/checkpoint/zip_archive.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

constexpr char kSafetensors[] = "model.safetensors";
constexpr char kSafetensorsIndex[] = "model.safetensors.index.json";
constexpr char kBin[] = "pytorch_model.bin";
constexpr char kBinIndex[] = "pytorch_model.bin.index.json";

bool IsRegularFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

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

// OK once a safetensors file is as long as its header says (8-byte length, JSON header,
// then the data up to the largest data_offsets end).
absl::Status CheckSafetensorsWhole(const fs::path& file) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  unsigned char length_bytes[8] = {};
  if (ec || !in.read(reinterpret_cast<char*>(length_bytes), sizeof(length_bytes))) {
    return absl::UnavailableError(absl::StrCat(file.string(), ": header not written yet"));
  }
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | length_bytes[i];
  if (header_length > size - sizeof(length_bytes)) {
    return absl::UnavailableError(absl::StrCat(file.string(), ": header not written yet"));
  }
  std::string header(header_length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_length));
  uint64_t data_end = 0;
  try {
    const nlohmann::json tensors = nlohmann::json::parse(header);
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      data_end = std::max(data_end, it.value().at("data_offsets").at(1).get<uint64_t>());
    }
  } catch (const nlohmann::json::exception&) {
    // Malformed for good: whole as far as waiting goes; the loader names what is wrong.
    return absl::OkStatus();
  }
  const uint64_t extent = sizeof(length_bytes) + header_length + data_end;
  if (size < extent) {
    return absl::UnavailableError(
        absl::StrCat(file.string(), ": ", size, " of ", extent, " bytes written"));
  }
  return absl::OkStatus();
}

// OK once a torch zip's central directory (written last) reads.
absl::Status CheckTorchZipWhole(const fs::path& file) {
  absl::StatusOr<std::shared_ptr<MappedFile>> mapped = MappedFile::Open(file);
  absl::Status status = mapped.status();
  if (mapped.ok()) status = ZipArchive::Open(*mapped, file.string()).status();
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat(file.string(), ": no central directory yet (", status.message(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

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

absl::StatusOr<WeightFiles> FindWeightFiles(const fs::path& dir) {
  // Single files before indexes; safetensors before torch zip.
  WeightFiles weights;
  if (IsRegularFile(dir / kSafetensors)) {
    weights.files = {dir / kSafetensors};
  } else if (IsRegularFile(dir / kSafetensorsIndex)) {
    weights.index_path = dir / kSafetensorsIndex;
  } else if (IsRegularFile(dir / kBin)) {
    weights.files = {dir / kBin};
    weights.format = WeightFormat::kTorchZip;
  } else if (IsRegularFile(dir / kBinIndex)) {
    weights.index_path = dir / kBinIndex;
    weights.format = WeightFormat::kTorchZip;
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir.string(), ": no weights found (looked for ",
                     absl::StrJoin({kSafetensors, kSafetensorsIndex, kBin, kBinIndex}, ", "), ")"));
  }
  if (weights.index_path.empty()) return weights;
  ASSIGN_OR_RETURN(weights.index, ReadShardIndex(weights.index_path));
  for (const std::string& shard : weights.index->shards) {
    if (!IsRegularFile(dir / shard)) {
      std::string example;
      for (const auto& [name, file] : weights.index->weight_map) {
        if (file == shard) {
          example = name;
          break;
        }
      }
      return absl::NotFoundError(absl::StrCat(weights.index_path.string(), ": shard '", shard,
                                              "' (holding '", example, "') not found in ",
                                              dir.string()));
    }
    weights.files.push_back(dir / shard);
  }
  return weights;
}

absl::Status CheckCheckpointComplete(const fs::path& dir) {
  const absl::StatusOr<nlohmann::json> config = ReadJsonFile(dir / "config.json");
  if (!config.ok()) {
    return absl::UnavailableError(absl::StrCat(dir.string(), ": config.json not whole yet (",
                                               config.status().message(), ")"));
  }
  const absl::StatusOr<WeightFiles> weights = FindWeightFiles(dir);
  if (!weights.ok()) return absl::UnavailableError(weights.status().message());
  for (const fs::path& file : weights->files) {
    RETURN_IF_ERROR(weights->format == WeightFormat::kSafetensors ? CheckSafetensorsWhole(file)
                                                                  : CheckTorchZipWhole(file));
  }
  return absl::OkStatus();
}

}  // namespace anisoscope::analysis
