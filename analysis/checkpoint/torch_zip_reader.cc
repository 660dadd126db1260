#include "analysis/checkpoint/torch_zip_reader.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/mapped_file.h"
#include "analysis/checkpoint/state_dict_unpickler.h"
#include "analysis/checkpoint/zip_archive.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// torch.save names every record "<archive>/...", the archive folder being the file's stem
// at save time: the folder of the one data.pkl at depth one.
absl::StatusOr<std::string> ArchiveFolder(const ZipArchive& archive, const std::string& label) {
  std::string folder;
  for (const std::string& name : archive.Names()) {
    const size_t slash = name.find('/');
    if (slash == std::string::npos || name.compare(slash, std::string::npos, "/data.pkl") != 0) {
      continue;
    }
    if (!folder.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": archive has more than one data.pkl"));
    }
    folder = name.substr(0, slash + 1);
  }
  if (folder.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": archive has no data.pkl (records: ", absl::StrJoin(archive.Names(), ", "), ")"));
  }
  return folder;
}

// A view of one storage record in the mapping, even where it is not aligned for its dtype
// (StoredTensor::Aligned copies what a model uses); the tensor keeps the mapping alive.
absl::StatusOr<at::Tensor> ViewStorage(const ZipArchive& archive, const std::string& folder,
                                       const std::string& label, const std::string& key,
                                       at::ScalarType dtype, int64_t numel) {
  const std::string record = "data/" + key;
  if (key.empty() || key.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": storage key '", key, "' is malformed"));
  }
  absl::StatusOr<ZipEntryView> entry = archive.Entry(folder + record);
  if (absl::IsNotFound(entry.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": storage record '", record, "' is missing"));
  }
  RETURN_IF_ERROR(entry.status());
  const size_t item_size = at::elementSize(dtype);
  if (static_cast<uint64_t>(numel) > entry->size / item_size) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": storage record '", record, "' has ",
                                                   entry->size, " bytes, too few for ", numel,
                                                   " elements of ", c10::toString(dtype)));
  }
  const auto options = at::TensorOptions().dtype(dtype);
  if (numel == 0) return at::empty({0}, options);
  std::shared_ptr<MappedFile> mapped = archive.file();
  at::Tensor view = at::from_blob(
      entry->data, {numel}, [mapped](void*) {}, options);
  return view;
}

}  // namespace

absl::StatusOr<NamedTensors> ReadTorchZipStateDict(const std::filesystem::path& file,
                                                   const FileGate& gate) {
  const std::string label = file.string();
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::Open(file, gate));
  if (mapped->size() < 4 || std::memcmp(mapped->data(), "PK\x03\x04", 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": not a zip archive (torch.save's legacy non-zip format is unsupported)"));
  }
  ASSIGN_OR_RETURN(const ZipArchive archive, ZipArchive::Open(mapped, label));
  ASSIGN_OR_RETURN(const std::string folder, ArchiveFolder(archive, label));
  // PyTorch 2.x records the writer's byte order; tensors are read as little-endian.
  if (absl::StatusOr<ZipEntryView> order = archive.Entry(folder + "byteorder"); order.ok()) {
    const std::string text(reinterpret_cast<const char*>(order->data), order->size);
    if (text != "little") {  // not quoted: an error carries no bytes of a file
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": record 'byteorder' is not 'little'; only little-endian archives are read"));
    }
  }
  ASSIGN_OR_RETURN(const ZipEntryView pickle, archive.Entry(folder + "data.pkl"));
  try {
    return UnpickleStateDict(
        std::string_view(reinterpret_cast<const char*>(pickle.data), pickle.size), label,
        [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
          return ViewStorage(archive, folder, label, key, dtype, numel);
        });
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": not a readable torch.save archive: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": not a readable torch.save archive: ", e.what()));
  }
}

}  // namespace anisoscope::analysis
