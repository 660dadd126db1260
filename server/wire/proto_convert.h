// Conversions between the wire types (anisoscope.v1) and the store's records. Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
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
void ToProto(const storage::AlarmRecord& alarm, pb::Alarm* out);
void ToProto(const storage::SeriesResult& result, const std::string& metric,
             pb::QuerySeriesResponse* out);
void ToProto(const storage::VectorResult& result, pb::QueryVectorsResponse* out);

// The probe fields of a stored job spec, as on the wire.
pb::ProbeSpec ProbeSpecToProto(const storage::JobSpec& spec);
// Copies source, mode, samples (0 -> 128) and seq_len into `spec`; the path is left to
// the caller (it must be resolved first). INVALID_ARGUMENT for an unspecified source or a
// negative count.
absl::Status ProbeSpecFromProto(const pb::ProbeSpec& probe, storage::JobSpec* spec);

storage::SeriesQuery FromProto(const pb::QuerySeriesRequest& request);
storage::VectorQuery FromProto(const pb::QueryVectorsRequest& request);

}  // namespace anisoscope::server
