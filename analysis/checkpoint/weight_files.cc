#include "analysis/checkpoint/weight_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/mapped_file.h"
#include "analysis/checkpoint/safetensors_header.h"
#include "analysis/checkpoint/zip_archive.h"
#include "common/json_error.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

constexpr char kSafetensors[] = "model.safetensors";
constexpr char kSafetensorsIndex[] = "model.safetensors.index.json";
constexpr char kBin[] = "pytorch_model.bin";
constexpr char kBinIndex[] = "pytorch_model.bin.index.json";

// config.json and shard indexes are kilobytes; a bound keeps a hostile one from filling memory.
constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;

absl::StatusOr<ShardIndex> ReadShardIndex(const fs::path& index_path, const FileGate& gate) {
  ASSIGN_OR_RETURN(nlohmann::json index, ReadJsonFile(index_path, gate));
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
absl::Status CheckSafetensorsWhole(const fs::path& file, const FileGate& gate) {
  absl::StatusOr<UniqueFd> fd = gate.OpenFile(file);
  struct stat info {};
  unsigned char length_bytes[8] = {};
  if (!fd.ok() || ::fstat(fd->get(), &info) != 0 ||
      ::pread(fd->get(), length_bytes, sizeof length_bytes, 0) !=
          static_cast<ssize_t>(sizeof length_bytes)) {
    return absl::UnavailableError(absl::StrCat(file.string(), ": header not written yet"));
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | length_bytes[i];
  if (header_length > size - sizeof(length_bytes) || header_length > kMaxJsonBytes) {
    return absl::UnavailableError(absl::StrCat(file.string(), ": header not written yet"));
  }
  std::string header(header_length, '\0');
  if (::pread(fd->get(), header.data(), header_length, sizeof length_bytes) !=
      static_cast<ssize_t>(header_length)) {
    return absl::UnavailableError(absl::StrCat(file.string(), ": header not written yet"));
  }
  const absl::StatusOr<std::vector<SafetensorsEntry>> entries =
      ParseSafetensorsHeader(header, file.string());
  // Malformed for good: whole as far as waiting goes; the loader names what is wrong.
  if (!entries.ok()) return absl::OkStatus();
  uint64_t data_end = 0;
  for (const SafetensorsEntry& entry : *entries) {
    if (entry.data_offsets.size() == 2) data_end = std::max(data_end, entry.data_offsets[1]);
  }
  const uint64_t extent = sizeof(length_bytes) + header_length + data_end;
  if (size < extent) {
    return absl::UnavailableError(
        absl::StrCat(file.string(), ": ", size, " of ", extent, " bytes written"));
  }
  return absl::OkStatus();
}

// OK once a torch zip's central directory (written last) reads.
absl::Status CheckTorchZipWhole(const fs::path& file, const FileGate& gate) {
  absl::StatusOr<std::shared_ptr<MappedFile>> mapped = MappedFile::Open(file, gate);
  absl::Status status = mapped.status();
  if (mapped.ok()) status = ZipArchive::Open(*mapped, file.string()).status();
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat(file.string(), ": no central directory yet (", status.message(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> ReadJsonFile(const fs::path& path, const FileGate& gate) {
  ASSIGN_OR_RETURN(const std::string text, gate.ReadFile(path, kMaxJsonBytes));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", JsonErrorText(e)));
  }
}

absl::StatusOr<WeightFiles> FindWeightFiles(const fs::path& dir, const FileGate& gate) {
  // Single files before indexes; safetensors before torch zip.
  WeightFiles weights;
  if (gate.IsFile(dir / kSafetensors)) {
    weights.files = {dir / kSafetensors};
  } else if (gate.IsFile(dir / kSafetensorsIndex)) {
    weights.index_path = dir / kSafetensorsIndex;
  } else if (gate.IsFile(dir / kBin)) {
    weights.files = {dir / kBin};
    weights.format = WeightFormat::kTorchZip;
  } else if (gate.IsFile(dir / kBinIndex)) {
    weights.index_path = dir / kBinIndex;
    weights.format = WeightFormat::kTorchZip;
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir.string(), ": no weights found (looked for ",
                     absl::StrJoin({kSafetensors, kSafetensorsIndex, kBin, kBinIndex}, ", "), ")"));
  }
  if (weights.index_path.empty()) return weights;
  ASSIGN_OR_RETURN(weights.index, ReadShardIndex(weights.index_path, gate));
  for (const std::string& shard : weights.index->shards) {
    if (!gate.IsFile(dir / shard)) {
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

absl::Status CheckCheckpointComplete(const fs::path& dir, const FileGate& gate) {
  const absl::StatusOr<nlohmann::json> config = ReadJsonFile(dir / "config.json", gate);
  if (!config.ok()) {
    return absl::UnavailableError(absl::StrCat(dir.string(), ": config.json not whole yet (",
                                               config.status().message(), ")"));
  }
  const absl::StatusOr<WeightFiles> weights = FindWeightFiles(dir, gate);
  if (!weights.ok()) return absl::UnavailableError(weights.status().message());
  for (const fs::path& file : weights->files) {
    RETURN_IF_ERROR(weights->format == WeightFormat::kSafetensors
                        ? CheckSafetensorsWhole(file, gate)
                        : CheckTorchZipWhole(file, gate));
  }
  return absl::OkStatus();
}

}  // namespace anisoscope::analysis
