// The query core shared by the gRPC services and the HTTP API: each function validates a
// request, reads namespace `ns`'s runs or jobs from the store (or the job runner) and
// returns the response message. Another namespace's run or job is NOT_FOUND, as if it
// did not exist.
//
// INVALID_ARGUMENT for a bad request (the message names the field), NOT_FOUND for an
// unknown run, probe or job, FAILED_PRECONDITION when probe_id is empty and the run has
// several probes; the store's errors otherwise. Thread-safe; every call blocks on SQLite
// reads (never on extraction). `store` and `runner` are not owned.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/jobs/job_runner.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {
namespace pb = ::anisoscope::v1;
}  // namespace anisoscope::server

namespace anisoscope::server::queries {

absl::StatusOr<pb::ListRunsResponse> ListRuns(storage::MetricsStore& store, const std::string& ns,
                                              const pb::ListRunsRequest& request);
// Points ordered by layer, head, step; since_step is an exclusive lower bound combined
// with from_step/to_step; max_points > 0 downsamples each (layer, head) series
// (server/queries/series_downsampling.h) and sets `downsampled`. RESOURCE_EXHAUSTED, before any
// point is read (the store counts them first), when the answer would have more points than
// `limits` allow.
absl::StatusOr<pb::QuerySeriesResponse> QuerySeries(storage::MetricsStore& store,
                                                    const std::string& ns,
                                                    const pb::QuerySeriesRequest& request,
                                                    const RequestLimits& limits);
// RESOURCE_EXHAUSTED, before any is read, when the vectors hold more values than `limits`
// allow.
absl::StatusOr<pb::QueryVectorsResponse> QueryVectors(storage::MetricsStore& store,
                                                      const std::string& ns,
                                                      const pb::QueryVectorsRequest& request,
                                                      const RequestLimits& limits);
// Projects every stored q_mean and k_mean of the head on the top two right singular
// vectors of their uncentered stack (server/queries/trajectory_projection.h). NOT_FOUND when the
// head has no stored vectors (e.g. a layer or head out of range); RESOURCE_EXHAUSTED as
// QueryVectors'.
absl::StatusOr<pb::QueryTrajectoryResponse> QueryTrajectory(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryTrajectoryRequest& request,
    const RequestLimits& limits);

// Namespace `ns`'s alarms (only request.run's unless it is empty; NOT_FOUND for a run the
// namespace does not have) changed after
// since_revision, by revision; limit 0 means 1000, at most kMaxAlarmsListed; `more` when
// others match.
absl::StatusOr<pb::ListAlarmsResponse> ListAlarms(storage::MetricsStore& store,
                                                  const std::string& ns,
                                                  const pb::ListAlarmsRequest& request);
inline constexpr int kMaxAlarmsListed = 10000;

// The metric catalogue (analysis/metric_catalog/metric_catalog.h) and its groups; the same for
// every namespace, reads nothing.
pb::ListMetricsResponse ListMetrics(const pb::ListMetricsRequest& request);

// Most recent first; limit 0 means 100; `run` keeps only that run's jobs.
absl::StatusOr<pb::ListJobsResponse> ListJobs(JobRunner& runner, const std::string& ns,
                                              const pb::ListJobsRequest& request);
absl::StatusOr<pb::Job> GetJob(JobRunner& runner, const std::string& ns,
                               const pb::GetJobRequest& request);
// Job `id` when it belongs to `ns`; NOT_FOUND otherwise (shared with CancelJob and
// WatchJob, which check before they act).
absl::StatusOr<storage::JobRecord> JobInNamespace(JobRunner& runner, const std::string& ns,
                                                  int64_t id);

// INVALID_ARGUMENT unless id > 0 (shared with CancelJob and WatchJob).
absl::Status ValidateJobId(int64_t id);

}  // namespace anisoscope::server::queries
