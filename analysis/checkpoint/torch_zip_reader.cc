#include "analysis/checkpoint/torch_zip_reader.h"

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>

#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/state_dict_unpickler.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

using caffe2::serialize::PyTorchStreamReader;

// The first line of a LibTorch message (the rest is a C++ backtrace).
std::string FirstLine(const char* what) {
  const std::string text(what);
  return text.substr(0, text.find('\n'));
}

// Runs `body`, turning LibTorch and standard exceptions into INVALID_ARGUMENT on `label`.
template <typename T, typename Body>
absl::StatusOr<T> Guarded(const std::string& label, Body&& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": not a readable torch.save archive: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": not a readable torch.save archive: ", FirstLine(e.what())));
  }
}

// Checks that `file` exists and starts like a zip archive.
absl::Status CheckZipMagic(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(file.string(), ": cannot open"));
  char magic[4] = {};
  in.read(magic, sizeof(magic));
  if (in.gcount() != 4 || std::string(magic, 4) != std::string("PK\x03\x04", 4)) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.string(), ": not a zip archive (torch.save's legacy non-zip format is unsupported)"));
  }
  return absl::OkStatus();
}

// Reads one record; the tensor's deleter owns the record buffer.
absl::StatusOr<at::Tensor> ReadStorage(PyTorchStreamReader& reader, const std::string& label,
                                       const std::string& key, at::ScalarType dtype,
                                       int64_t numel) {
  const std::string record = "data/" + key;
  if (key.empty() || key.find('/') != std::string::npos || !reader.hasRecord(record)) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": storage record '", record, "' is missing"));
  }
  auto [data, size] = reader.getRecord(record);
  const size_t item_size = at::elementSize(dtype);
  if (static_cast<uint64_t>(numel) > size / item_size) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": storage record '", record, "' has ",
                                                   size, " bytes, too few for ", numel,
                                                   " elements of ", c10::toString(dtype)));
  }
  if (numel == 0) return at::empty({0}, at::TensorOptions().dtype(dtype));
  auto owner = std::make_shared<at::DataPtr>(std::move(data));
  return at::from_blob(
      owner->get(), {numel}, [owner](void*) {}, at::TensorOptions().dtype(dtype));
}

}  // namespace

absl::StatusOr<NamedTensors> ReadTorchZipStateDict(const std::filesystem::path& file) {
  const std::string label = file.string();
  RETURN_IF_ERROR(CheckZipMagic(file));
  return Guarded<NamedTensors>(label, [&]() -> absl::StatusOr<NamedTensors> {
    PyTorchStreamReader reader(file.string());
    // Record names come back without the archive's top-level folder (e.g. "archive/").
    if (!reader.hasRecord("data.pkl")) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": archive has no data.pkl (records: ",
                                                     absl::StrJoin(reader.getAllRecords(), ", "),
                                                     ")"));
    }
    auto [pickle_data, pickle_size] = reader.getRecord("data.pkl");
    const std::string_view pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    return UnpickleStateDict(pickle, label,
                             [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
                               return ReadStorage(reader, label, key, dtype, numel);
                             });
  });
}

}  // namespace anisoscope::analysis
