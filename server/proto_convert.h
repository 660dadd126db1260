// Conversions between the wire types (anisoscope.v1), the store's records and the engine's
// types. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "analysis/metrics/checkpoint_metrics.h"
#include "analysis/probe/probe.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "storage/types.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

pb::JobState ToProto(storage::JobState state);
pb::StepState ToProto(storage::StepState state);
void ToProto(const storage::JobCheckpoint& checkpoint, pb::CheckpointStatus* out);
// Fills steps_total and steps_finished from the checkpoints.
void ToProto(const storage::JobRecord& job, pb::Job* out);
void ToProto(const storage::RunInfo& run, pb::Run* out);
void ToProto(const storage::SeriesResult& result, const std::string& metric,
             pb::QuerySeriesResponse* out);
void ToProto(const storage::VectorResult& result, pb::QueryVectorsResponse* out);

// The probe fields of a stored job spec, as on the wire.
pb::ProbeSpec ProbeSpecToProto(const storage::JobSpec& spec);
// Copies source, mode, samples (0 -> 128) and seq_len into `spec`; the path is left to
// the caller (it must be resolved first). INVALID_ARGUMENT for an unspecified source or a
// negative count.
absl::Status ProbeSpecFromProto(const pb::ProbeSpec& probe, storage::JobSpec* spec);
// The engine's probe spec for a stored job; INVALID_ARGUMENT for an unknown source or mode.
absl::StatusOr<analysis::ProbeSpec> ToAnalysisProbeSpec(const storage::JobSpec& spec);

storage::SeriesQuery FromProto(const pb::QuerySeriesRequest& request);
storage::VectorQuery FromProto(const pb::QueryVectorsRequest& request);

// Everything the store keeps of one extracted checkpoint: every scalar (ForEachScalar) and
// the q_mean / k_mean vectors of every (layer, head).
storage::StepResult ToStepResult(const std::string& run, int64_t step,
                                 const std::string& checkpoint_path, int64_t checkpoint_bytes,
                                 const analysis::Probe& probe,
                                 const analysis::CheckpointMetrics& metrics);

}  // namespace anisoscope::server
