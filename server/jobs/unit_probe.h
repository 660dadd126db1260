// The probe a job's units carry to workers: token ids read here from the job's probe file
// (so workers need not see it), or the text probe's spec for each worker to tokenize with
// the checkpoint's own tokenizer. Thread-safe; reads the token file.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "storage/types.h"

namespace anisoscope::server {

// The token file is opened through `files` (the job's namespace's gate) and read only as
// far as `max_tokens` ids allow. INVALID_ARGUMENT for an unknown source or mode, or a
// malformed token file (naming its line); the gate's error for a file it refuses;
// RESOURCE_EXHAUSTED naming --max-probe-tokens past `max_tokens`, or naming the message
// limit for a unit that could not be sent (server/jobs/probe_bounds.h).
absl::StatusOr<::anisoscope::v1::UnitProbe> UnitProbeFromSpec(const storage::JobSpec& spec,
                                                              const FileGate& files,
                                                              int64_t max_tokens);

}  // namespace anisoscope::server
