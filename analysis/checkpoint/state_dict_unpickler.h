// A non-executing pickle interpreter for the data.pkl of a torch.save state dict.
//
// Understands the opcodes that torch.save (pickle protocol 2, and the protocol 4/5 framing
// opcodes) emits for a dict or OrderedDict of tensors. Globals are resolved against a fixed
// allow-list (collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
// _rebuild_parameter, torch.*Storage types); anything else is rejected, and nothing is
// ever imported or called. Persistent ids ('storage', type, key, location, numel) are
// resolved through a caller-supplied loader; tensors are strided views of those storages,
// so tensors sharing a storage share memory. Attribute state set with BUILD on a dict
// (the `_metadata` of a state dict) is ignored. Memory is bounded by the pickle's size:
// the objects it builds (values, stack and container slots, memo entries, marks) are
// charged as they are made, and a pickle charged more than 2 bytes per byte of itself plus
// 16 MiB is refused (a state dict needs far less than the constant). Stateless; thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "analysis/checkpoint/safetensors_reader.h"

namespace anisoscope::analysis {

// Returns storage `key` as a 1-D tensor of `dtype` with at least `numel` elements.
using StorageLoader = std::function<absl::StatusOr<at::Tensor>(
    const std::string& key, at::ScalarType dtype, int64_t numel)>;

// Interprets `pickle` and returns the top-level dict's (name, tensor) entries in order.
// `label` (the file name) prefixes every error; errors are INVALID_ARGUMENT, or the
// loader's own status.
absl::StatusOr<NamedTensors> UnpickleStateDict(std::string_view pickle, const std::string& label,
                                               const StorageLoader& load_storage);

}  // namespace anisoscope::analysis
