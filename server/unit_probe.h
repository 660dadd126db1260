// The probe a job's units carry to workers: token ids read here from the job's probe file
// (so workers need not see it), or the text probe's spec for each worker to tokenize with
// the checkpoint's own tokenizer. Thread-safe; reads the token file.
#pragma once

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "storage/types.h"

namespace anisoscope::server {

// INVALID_ARGUMENT for an unknown source or mode, or a malformed token file (naming its
// line); NOT_FOUND for a missing one.
absl::StatusOr<::anisoscope::v1::UnitProbe> UnitProbeFromSpec(const storage::JobSpec& spec);

}  // namespace anisoscope::server
