// The JSON header of a .safetensors file, parsed in one linear pass and checked against the
// format's layout rules. No LibTorch: the server's check that a checkpoint is whole reads
// headers with it as the loader does.
//
// The header is read with nlohmann's SAX interface straight into a vector of entries (no
// JSON tree: memory is proportional to the header, time linear in it, whatever its shape);
// "__metadata__" and fields other than dtype, shape and data_offsets are skipped unread.
// The layout check is the reference validator's (huggingface/safetensors `validate`):
// sorted by offset, the tensors start at 0, are contiguous and do not overlap, and end
// exactly at the end of the data. Errors name the file and the tensor, never quote bytes of
// the file beyond a (shortened) tensor name. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anisoscope::analysis {

// One tensor of the header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as written, e.g. "F32"; empty when the header has none
  std::vector<uint64_t> shape;
  std::vector<uint64_t> data_offsets;  // [begin, end] when well formed
};

// The most tensors one file may list: a loaded tensor costs about 1 KiB of heap (ATen's
// and the checkpoint's bookkeeping), so this keeps a header of tiny entries to ~64 MiB.
// Real checkpoints hold at most a few thousand per file (a shard of a large MoE).
inline constexpr size_t kMaxSafetensorsTensors = size_t{1} << 16;

// Parses `header` (the JSON text) into its tensor entries, in header order. `label` (the
// file) prefixes every error. INVALID_ARGUMENT for malformed JSON (naming the byte), a
// header that is not an object, an entry that is not an object, a missing or mistyped
// dtype, shape or data_offsets, a tensor named twice, or more than kMaxSafetensorsTensors.
absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(std::string_view header,
                                                                     const std::string& label);

// OK when `entries` (each with a well-formed [begin, end] data_offsets), sorted by offset,
// start at 0, are contiguous and do not overlap, and end exactly at `data_size`;
// INVALID_ARGUMENT naming the file and the tensor at fault otherwise.
absl::Status CheckSafetensorsLayout(const std::vector<SafetensorsEntry>& entries,
                                    uint64_t data_size, const std::string& label);

// "`label`: tensor 'name'", the name shortened to 128 bytes: a prefix for errors.
std::string DescribeSafetensorsTensor(const std::string& label, const std::string& name);

}  // namespace anisoscope::analysis
