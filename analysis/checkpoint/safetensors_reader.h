// Reads a .safetensors file into CPU tensors by memory-mapping it.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
// The header is parsed in linear time and every field, and the layout the format demands
// (tensors contiguous from 0, not overlapping, filling the data), validated before any
// tensor is made (safetensors_header.h). Tensors view the mapping without a copy (each holds
// a reference that keeps the mapping alive; the mapping is private copy-on-write, so writes
// never reach the file), misaligned ones too: StoredTensor::Aligned copies those on use.
// Thread-safe (no shared state).
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

// A tensor name and its value, in file order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Maps `file` and returns its tensors in header order. INVALID_ARGUMENT names the file
// and the tensor or field at fault; NOT_FOUND when the file cannot be opened.
absl::StatusOr<NamedTensors> ReadSafetensors(const std::filesystem::path& file,
                                             const FileGate& gate);

// The ATen dtype of a safetensors dtype string ("F32", "BF16", ...); false if unknown.
bool SafetensorsDtype(const std::string& name, at::ScalarType* dtype);

}  // namespace anisoscope::analysis
