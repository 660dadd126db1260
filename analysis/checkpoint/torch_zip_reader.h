// Reads the state dict that torch.save wrote to a file (the zip format of torch >= 1.6).
//
// The file is mapped (MappedFile) and read as a zip of stored records (ZipArchive):
// <archive>/data.pkl is interpreted by UnpickleStateDict (never executed) and each storage
// <archive>/data/<key> is viewed in place, as safetensors are: tensors keep the mapping
// alive and share it where they share a storage; a record not aligned for its dtype is
// viewed too (StoredTensor::Aligned copies, on use, what a model reads of it). LibTorch exceptions become statuses naming the file. Blocks on file I/O (page
// faults as tensors are read); thread-safe (no shared state).
#pragma once

#include <filesystem>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/safetensors_reader.h"

namespace anisoscope::analysis {

// The (name, tensor) entries of the state dict in `file`, in pickle order. INVALID_ARGUMENT
// names the file and what is wrong (not a zip, truncated, missing data.pkl or storage,
// a forbidden pickle global); NOT_FOUND when the file does not exist.
absl::StatusOr<NamedTensors> ReadTorchZipStateDict(const std::filesystem::path& file,
                                                   const FileGate& gate);

}  // namespace anisoscope::analysis
