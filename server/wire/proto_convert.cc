#include "server/wire/proto_convert.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace anisoscope::server {
namespace {

// Beyond what any probe's token count or a step's upload (64 MiB) allows.
constexpr int64_t kMaxTokenSamples = 65536;

// The wire name of a state from its storage name ("JOB_STATE_" + "succeeded" in capitals):
// the states' names live in storage/types.cc alone (proto_convert_test checks each maps).
std::string ProtoEnumName(const char* prefix, const char* name) {
  return absl::AsciiStrToUpper(absl::StrCat(prefix, name));
}

}  // namespace

pb::JobState ToProto(storage::JobState state) {
  static const std::vector<pb::JobState>* const by_state = [] {
    auto* table = new std::vector<pb::JobState>();
    for (const storage::JobState each : storage::kJobStates) {
      pb::JobState value = pb::JOB_STATE_UNSPECIFIED;
      pb::JobState_Parse(ProtoEnumName("JOB_STATE_", storage::JobStateName(each)), &value);
      table->push_back(value);
    }
    return table;
  }();
  const auto index = static_cast<size_t>(state);
  return index < by_state->size() ? (*by_state)[index] : pb::JOB_STATE_UNSPECIFIED;
}

pb::StepState ToProto(storage::StepState state) {
  static const std::vector<pb::StepState>* const by_state = [] {
    auto* table = new std::vector<pb::StepState>();
    for (const storage::StepState each : storage::kStepStates) {
      pb::StepState value = pb::STEP_STATE_UNSPECIFIED;
      pb::StepState_Parse(ProtoEnumName("STEP_STATE_", storage::StepStateName(each)), &value);
      table->push_back(value);
    }
    return table;
  }();
  const auto index = static_cast<size_t>(state);
  return index < by_state->size() ? (*by_state)[index] : pb::STEP_STATE_UNSPECIFIED;
}

void ToProto(const storage::JobCheckpoint& checkpoint, pb::CheckpointStatus* out) {
  out->set_step(checkpoint.step);
  out->set_path(checkpoint.path);
  out->set_size_bytes(checkpoint.size_bytes);
  out->set_state(ToProto(checkpoint.state));
  out->set_error(checkpoint.error);
  out->set_probe_id(checkpoint.probe_id);
  out->set_seconds(checkpoint.seconds);
  out->set_attempt(checkpoint.attempt);
  out->set_worker(checkpoint.worker);
  out->set_fingerprint(checkpoint.fingerprint);
  if (checkpoint.duplicate_of >= 0) out->set_duplicate_of(checkpoint.duplicate_of);
  out->set_revision(checkpoint.revision);
  out->set_commit(checkpoint.commit);
  if (checkpoint.fetch.has_value()) {
    pb::FetchProgress* fetch = out->mutable_fetch();
    fetch->set_bytes_done(checkpoint.fetch->bytes_done);
    fetch->set_bytes_total(checkpoint.fetch->bytes_total);
    fetch->set_bytes_per_second(checkpoint.fetch->bytes_per_second);
    fetch->set_cache_bytes(checkpoint.fetch->cache_bytes);
  }
}

void ToProto(const storage::JobRecord& job, pb::Job* out) {
  out->Clear();
  out->set_id(job.id);
  out->set_run(job.spec.run);
  out->set_state(ToProto(job.state));
  *out->mutable_probe() = ProbeSpecToProto(job.spec);
  out->set_force(job.spec.force);
  out->set_dedupe(job.spec.dedupe);
  out->set_follow(!job.spec.follow_dir.empty());
  if (job.spec.until_step.has_value()) out->set_until_step(*job.spec.until_step);
  if (!job.spec.source.empty() && !out->mutable_source()->ParseFromString(job.spec.source)) {
    out->clear_source();
  }
  int finished = 0;
  for (const storage::JobCheckpoint& checkpoint : job.checkpoints) {
    ToProto(checkpoint, out->add_checkpoints());
    if (checkpoint.state != storage::StepState::kPending &&
        checkpoint.state != storage::StepState::kRunning) {
      ++finished;
    }
  }
  out->set_error(job.error);
  out->set_created_at(job.created_at);
  out->set_namespace_(job.spec.ns);
  out->set_updated_at(job.updated_at);
  out->set_steps_total(static_cast<int32_t>(job.checkpoints.size()));
  out->set_steps_finished(finished);
}

void ToProto(const storage::AlarmRecord& alarm, pb::Alarm* out) {
  out->set_id(alarm.id);
  out->set_namespace_(alarm.ns);
  out->set_run(alarm.run);
  out->set_probe_id(alarm.probe_id);
  out->set_rule(alarm.rule);
  out->set_metric(alarm.metric);
  out->set_layer(alarm.layer);
  out->set_step(alarm.step);
  out->set_value(alarm.value);
  out->set_reference(alarm.reference);
  out->set_state(alarm.resolved_step.has_value() ? pb::ALARM_STATE_RESOLVED
                                                 : pb::ALARM_STATE_FIRING);
  if (alarm.resolved_step.has_value()) out->set_resolved_step(*alarm.resolved_step);
  out->set_fired_at(alarm.fired_at);
  out->set_resolved_at(alarm.resolved_at);
  out->set_severity(alarm.severity);
  out->set_summary(alarm.summary);
  out->set_revision(alarm.revision);
}

void ToProto(const storage::RunInfo& run, pb::Run* out) {
  out->set_name(run.name);
  out->set_model_family(run.model_family);
  out->set_num_layers(run.num_layers);
  out->set_num_heads(run.num_heads);
  out->set_head_dim(run.head_dim);
  for (const storage::ProbeInfo& probe : run.probes) {
    pb::Probe* p = out->add_probes();
    p->set_id(probe.id);
    p->set_description(probe.description);
    p->set_num_samples(probe.num_samples);
    p->set_num_tokens(probe.num_tokens);
  }
  for (int64_t step : run.steps) out->add_steps(step);
  out->set_created_at(run.created_at);
  out->set_namespace_(run.ns);
  for (const storage::StepDuplicate& duplicate : run.duplicates) {
    pb::StepDuplicate* d = out->add_duplicates();
    d->set_step(duplicate.step);
    d->set_duplicate_of(duplicate.duplicate_of);
    d->set_fingerprint(duplicate.fingerprint);
  }
  for (const storage::StepOriginRecord& origin : run.origins) {
    pb::StepOrigin* o = out->add_origins();
    o->set_step(origin.step);
    o->set_source(origin.source);
    o->set_revision(origin.revision);
    o->set_commit(origin.commit);
  }
}

void ToProto(const storage::SeriesResult& result, const std::string& metric,
             pb::QuerySeriesResponse* out) {
  out->set_probe_id(result.probe_id);
  out->set_metric(metric);
  out->mutable_points()->Reserve(static_cast<int>(result.points.size()));
  for (const storage::SeriesPoint& point : result.points) {
    pb::SeriesPoint* p = out->add_points();
    p->set_step(point.step);
    p->set_layer(point.layer);
    p->set_head(point.head);
    p->set_value(point.value);
  }
}

void ToProto(const storage::VectorResult& result, pb::QueryVectorsResponse* out) {
  out->set_probe_id(result.probe_id);
  for (const storage::VectorPoint& point : result.points) {
    pb::VectorPoint* p = out->add_points();
    p->set_step(point.step);
    p->mutable_values()->Add(point.values.begin(), point.values.end());
  }
}

pb::ProbeSpec ProbeSpecToProto(const storage::JobSpec& spec) {
  pb::ProbeSpec probe;
  if (spec.probe_source == "tokens") probe.set_source(pb::PROBE_SOURCE_TOKENS);
  if (spec.probe_source == "text") probe.set_source(pb::PROBE_SOURCE_TEXT);
  probe.set_path(spec.probe_path);
  if (spec.probe_mode == "windows") probe.set_mode(pb::PROBE_MODE_WINDOWS);
  if (spec.probe_mode == "lines") probe.set_mode(pb::PROBE_MODE_LINES);
  probe.set_samples(spec.samples);
  probe.set_seq_len(spec.seq_len);
  probe.set_token_samples(spec.token_samples);
  if (spec.metrics != "all") probe.set_metrics(spec.metrics);
  return probe;
}

namespace {

// The stored name of a probe source or mode; nullptr for none or a value this server does not
// know (the wire may carry any number).
const char* ProbeSourceName(pb::ProbeSource source) {
  switch (source) {
    case pb::PROBE_SOURCE_TOKENS:
      return "tokens";
    case pb::PROBE_SOURCE_TEXT:
      return "text";
    case pb::PROBE_SOURCE_UNSPECIFIED:
    case pb::ProbeSource_INT_MIN_SENTINEL_DO_NOT_USE_:
    case pb::ProbeSource_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return nullptr;
}

const char* ProbeModeName(pb::ProbeMode mode) {
  switch (mode) {
    case pb::PROBE_MODE_UNSPECIFIED:
    case pb::PROBE_MODE_WINDOWS:
      return "windows";
    case pb::PROBE_MODE_LINES:
      return "lines";
    case pb::ProbeMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case pb::ProbeMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return nullptr;
}

}  // namespace

absl::Status ProbeSpecFromProto(const pb::ProbeSpec& probe, storage::JobSpec* spec) {
  const char* source = ProbeSourceName(probe.source());
  if (source == nullptr) return absl::InvalidArgumentError("probe.source must be TOKENS or TEXT");
  spec->probe_source = source;
  const char* mode = ProbeModeName(probe.mode());
  if (mode == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown probe.mode ", probe.mode()));
  }
  spec->probe_mode = mode;
  if (probe.mode() == pb::PROBE_MODE_LINES && probe.source() != pb::PROBE_SOURCE_TEXT) {
    return absl::InvalidArgumentError("probe.mode LINES applies only to a TEXT probe");
  }
  if (probe.samples() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe.samples must be >= 0, got ", probe.samples()));
  }
  if (probe.seq_len() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe.seq_len must be >= 0, got ", probe.seq_len()));
  }
  if (probe.has_token_samples() &&
      (probe.token_samples() < 0 || probe.token_samples() > kMaxTokenSamples)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe.token_samples must be in 0..", kMaxTokenSamples, ", got ", probe.token_samples()));
  }
  spec->samples = probe.samples() == 0 ? 128 : probe.samples();
  spec->seq_len = probe.seq_len();
  if (probe.has_token_samples()) spec->token_samples = probe.token_samples();
  return absl::OkStatus();
}

storage::SeriesQuery FromProto(const pb::QuerySeriesRequest& request) {
  storage::SeriesQuery query;
  query.run = request.run();
  query.probe_id = request.probe_id();
  query.metric = request.metric();
  if (request.has_layer()) query.layer = request.layer();
  if (request.has_head()) query.head = request.head();
  if (request.has_from_step()) query.from_step = request.from_step();
  if (request.has_to_step()) query.to_step = request.to_step();
  if (request.has_since_step()) query.after_step = request.since_step();
  return query;
}

storage::VectorQuery FromProto(const pb::QueryVectorsRequest& request) {
  storage::VectorQuery query;
  query.run = request.run();
  query.probe_id = request.probe_id();
  query.kind = request.kind();
  query.layer = request.layer();
  query.head = request.head();
  if (request.has_from_step()) query.from_step = request.from_step();
  if (request.has_to_step()) query.to_step = request.to_step();
  return query;
}

}  // namespace anisoscope::server
