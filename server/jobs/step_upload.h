// The check of a worker's upload: a CompleteWorkRequest must hold every metric of the
// model shape it declares, exactly once and with exactly the values that shape needs, each
// finite unless METRICS.md's definition can be 0/0 (analysis::MayBeUndefined: NaN allowed),
// of a family the engine knows and a shape within bounds, and answer the unit it was leased
// with (its probe), before anything is stored. Pure; thread-safe.
//
// What stays trusted: the values themselves within those rules, and the architecture a
// run's first stored step declares (family, layers, heads, head_dim: every later step must
// match it); a text probe's id (the worker tokenizes it with the checkpoint's tokenizer)
// beyond its agreement with the id the lease's heartbeat reported.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "storage/types.h"

namespace anisoscope::server {

// Layers, heads, head_dim and hidden_size above these are refused as implausible (the largest
// supported models have 126 layers, 128 heads, head_dim 256 and hidden size 16384).
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxHeads = 1024;
inline constexpr int kMaxHeadDim = 4096;
inline constexpr int kMaxHiddenSize = 1 << 16;
// The longest probe description a worker may upload (the server stores its own label).
inline constexpr size_t kMaxProbeDescriptionBytes = 1024;

// The step to store for (run, step, checkpoint_path) from `upload`; INVALID_ARGUMENT naming
// the field for a missing, repeated, unknown or wrongly sized block, a bad shape or probe.
absl::StatusOr<storage::StepResult> StepResultFromUpload(
    const ::anisoscope::v1::CompleteWorkRequest& upload, const std::string& run, int64_t step,
    const std::string& checkpoint_path);

// INVALID_ARGUMENT unless `upload` answers a unit leased with `probe`: its probe id is the
// one the lease's heartbeat reported (`reported_probe_id`, when not empty); for a token
// probe, the id of the unit's token ids cut to the one length that gives upload.probe's
// num_tokens (the unit's seq_len when set), over all of the unit's samples; for a text
// probe, at most the unit's samples; token samples at most the unit's.
absl::Status CheckUploadMatchesUnit(const ::anisoscope::v1::CompleteWorkRequest& upload,
                                    const ::anisoscope::v1::UnitProbe& probe,
                                    const std::string& reported_probe_id);

}  // namespace anisoscope::server
