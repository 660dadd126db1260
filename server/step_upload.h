// The check of a worker's upload: a CompleteWorkRequest must hold every metric of the
// model shape it declares, exactly once and with exactly the values that shape needs,
// before anything is stored. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "storage/types.h"

namespace anisoscope::server {

// Layers, heads and head_dim above this are refused as implausible.
inline constexpr int kMaxShapeDimension = 1 << 14;

// The step to store for (run, step, checkpoint_path) from `upload`; INVALID_ARGUMENT naming
// the field for a missing, repeated, unknown or wrongly sized block, a bad shape or probe.
absl::StatusOr<storage::StepResult> StepResultFromUpload(
    const ::anisoscope::v1::CompleteWorkRequest& upload, const std::string& run, int64_t step,
    const std::string& checkpoint_path);

}  // namespace anisoscope::server
