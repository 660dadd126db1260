#include "analysis/checkpoint/safetensors_reader.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/mapped_file.h"
#include "common/json_error.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Reads one non-negative integer array field of a header entry.
absl::Status ReadUintArray(const OrderedJson& entry, const char* field, const std::string& where,
                           std::vector<uint64_t>* out) {
  const auto it = entry.find(field);
  if (it == entry.end() || !it->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no '", field, "' array"));
  }
  for (const OrderedJson& value : *it) {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " field '", field, "' holds ",
                                                     value.dump(), ", not a non-negative integer"));
    }
    out->push_back(value.get<uint64_t>());
  }
  return absl::OkStatus();
}

}  // namespace

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
  const char* header_begin = reinterpret_cast<const char*>(mapped->data() + 8);
  OrderedJson header;
  try {
    header = OrderedJson::parse(header_begin, header_begin + header_size);
  } catch (const OrderedJson::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": header is not valid JSON: ", JsonErrorText(e)));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": header is not a JSON object"));
  }

  uint8_t* data_begin = mapped->data() + 8 + header_size;
  const uint64_t data_size = mapped->size() - 8 - header_size;
  NamedTensors tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = absl::StrCat(label, ": tensor '", name, "'");
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is not a JSON object"));
    }
    const auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no 'dtype' string"));
    }
    at::ScalarType dtype;
    if (!SafetensorsDtype(dtype_it->get<std::string>(), &dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has unsupported dtype '", dtype_it->get<std::string>(), "'"));
    }
    std::vector<uint64_t> shape, offsets;
    RETURN_IF_ERROR(ReadUintArray(entry, "shape", where, &shape));
    RETURN_IF_ERROR(ReadUintArray(entry, "data_offsets", where, &offsets));
    if (offsets.size() != 2 || offsets[0] > offsets[1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " data_offsets [", absl::StrJoin(offsets, ", "), "] is not [begin, end]"));
    }
    const uint64_t item_size = at::elementSize(dtype);
    uint64_t numel = 1;
    std::vector<int64_t> sizes;
    for (uint64_t dim : shape) {
      if (dim > 0 && numel > std::numeric_limits<int64_t>::max() / item_size / dim) {
        return absl::InvalidArgumentError(absl::StrCat(where, " shape is too large"));
      }
      numel *= dim;
      sizes.push_back(static_cast<int64_t>(dim));
    }
    const std::string offsets_text =
        absl::StrCat("data_offsets [", offsets[0], ", ", offsets[1], "]");
    if (offsets[1] > data_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " ", offsets_text, " end past the data section (", data_size, " bytes)"));
    }
    if (offsets[1] - offsets[0] != numel * item_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ", offsets_text, " span ", offsets[1] - offsets[0],
                       " bytes but shape [", absl::StrJoin(shape, ", "), "] of ",
                       dtype_it->get<std::string>(), " needs ", numel * item_size));
    }
    const auto options = at::TensorOptions().dtype(dtype);
    uint8_t* begin = data_begin + offsets[0];
    at::Tensor tensor;
    if (numel == 0) {
      tensor = at::empty(sizes, options);
    } else {
      // The deleter owns a reference to the mapping, which outlives every view.
      tensor = at::from_blob(
          begin, sizes, [mapped](void*) {}, options);
      if (reinterpret_cast<uintptr_t>(begin) % item_size != 0) tensor = tensor.clone();
    }
    tensors.emplace_back(name, std::move(tensor));
  }
  return tensors;
}

}  // namespace anisoscope::analysis
