#include "analysis/checkpoint/safetensors_reader.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/mapped_file.h"
#include "analysis/checkpoint/safetensors_header.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {

bool SafetensorsDtype(const std::string& name, at::ScalarType* dtype) {
  static const std::pair<const char*, at::ScalarType> kDtypes[] = {
      {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"F64", at::kDouble},
      {"I64", at::kLong},  {"I32", at::kInt},  {"I16", at::kShort},     {"I8", at::kChar},
      {"U8", at::kByte},   {"BOOL", at::kBool}};
  for (const auto& [known, type] : kDtypes) {
    if (name == known) {
      *dtype = type;
      return true;
    }
  }
  return false;
}

namespace {

// The dtype of `entry` once its dtype is known, its shape's size fits and agrees with its
// data_offsets, and those lie in the data section.
absl::StatusOr<at::ScalarType> CheckEntry(const SafetensorsEntry& entry, uint64_t data_size,
                                          const std::string& label) {
  const std::string where = DescribeSafetensorsTensor(label, entry.name);
  at::ScalarType dtype;
  if (!SafetensorsDtype(entry.dtype, &dtype)) {
    // A dtype is quoted only when it is short: no error carries a long run of a file.
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has unsupported dtype ",
                     entry.dtype.size() <= 16 ? absl::StrCat("'", entry.dtype, "'")
                                              : absl::StrCat("of ", entry.dtype.size(), " bytes")));
  }
  const std::vector<uint64_t>& offsets = entry.data_offsets;
  if (offsets.size() != 2 || offsets[0] > offsets[1]) {
    return absl::InvalidArgumentError(absl::StrCat(where, " data_offsets is not [begin, end]"));
  }
  if (entry.shape.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(where, " shape has over 64 dimensions"));
  }
  const uint64_t item_size = at::elementSize(dtype);
  constexpr uint64_t kMaxBytes = std::numeric_limits<int64_t>::max();
  uint64_t numel = 1;
  for (uint64_t dim : entry.shape) {
    // Every dimension fits an int64_t, and so does the product of all in bytes.
    if (dim > kMaxBytes / item_size || (dim > 0 && numel > kMaxBytes / item_size / dim)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " shape is too large"));
    }
    numel *= dim;
  }
  const std::string offsets_text =
      absl::StrCat("data_offsets [", offsets[0], ", ", offsets[1], "]");
  if (offsets[1] > data_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " ", offsets_text, " end past the data section (", data_size, " bytes)"));
  }
  if (offsets[1] - offsets[0] != numel * item_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " ", offsets_text, " span ", offsets[1] - offsets[0], " bytes but shape [",
        absl::StrJoin(entry.shape, ", "), "] of ", entry.dtype, " needs ", numel * item_size));
  }
  return dtype;
}

}  // namespace

absl::StatusOr<NamedTensors> ReadSafetensors(const std::filesystem::path& file,
                                             const FileGate& gate) {
  const std::string label = file.string();
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::Open(file, gate));
  if (mapped->size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": ", mapped->size(), " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | mapped->data()[i];
  if (header_size > mapped->size() - 8) {
    // The length itself is not quoted: eight bytes of a file are no error's to give away.
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": header length runs past the end of the file (", mapped->size(), " bytes)"));
  }
  // Hugging Face's own reader refuses headers over 100 MB; ours stops at 64 MiB.
  constexpr uint64_t kMaxHeaderBytes = uint64_t{64} << 20;
  if (header_size > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": header longer than ", kMaxHeaderBytes, " bytes"));
  }
  const std::string_view header(reinterpret_cast<const char*>(mapped->data() + 8), header_size);
  ASSIGN_OR_RETURN(const std::vector<SafetensorsEntry> entries,
                   ParseSafetensorsHeader(header, label));

  uint8_t* data_begin = mapped->data() + 8 + header_size;
  const uint64_t data_size = mapped->size() - 8 - header_size;
  std::vector<at::ScalarType> dtypes;
  std::vector<std::vector<int64_t>> sizes;
  for (const SafetensorsEntry& entry : entries) {
    ASSIGN_OR_RETURN(at::ScalarType dtype, CheckEntry(entry, data_size, label));
    dtypes.push_back(dtype);
    sizes.emplace_back(entry.shape.begin(), entry.shape.end());
  }
  RETURN_IF_ERROR(CheckSafetensorsLayout(entries, data_size, label));

  NamedTensors tensors;
  tensors.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto options = at::TensorOptions().dtype(dtypes[i]);
    at::Tensor tensor;
    if (entries[i].data_offsets[0] == entries[i].data_offsets[1]) {
      tensor = at::empty(sizes[i], options);
    } else {
      // The deleter owns a reference to the mapping, which outlives every view. A view
      // misaligned for its dtype stays a view: StoredTensor::Aligned copies it on use.
      tensor = at::from_blob(
          data_begin + entries[i].data_offsets[0], sizes[i], [mapped](void*) {}, options);
    }
    tensors.emplace_back(entries[i].name, std::move(tensor));
  }
  return tensors;
}

}  // namespace anisoscope::analysis
