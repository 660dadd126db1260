// Reads the state dict that torch.save wrote to a file (the zip format of torch >= 1.6).
//
// The archive is opened with caffe2::serialize::PyTorchStreamReader; <archive>/data.pkl is
// interpreted by UnpickleStateDict (never executed) and each storage <archive>/data/<key>
// is read once into memory that the returned tensors keep alive (tensors sharing a storage
// share that memory). LibTorch exceptions become statuses naming the file. Blocks on file
// I/O; thread-safe (no shared state).
#pragma once

#include <filesystem>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/safetensors_reader.h"

namespace anisoscope::analysis {

// The (name, tensor) entries of the state dict in `file`, in pickle order. INVALID_ARGUMENT
// names the file and what is wrong (not a zip, truncated, missing data.pkl or storage,
// a forbidden pickle global); NOT_FOUND when the file does not exist.
absl::StatusOr<NamedTensors> ReadTorchZipStateDict(const std::filesystem::path& file);

}  // namespace anisoscope::analysis
