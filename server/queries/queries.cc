#include "server/queries/queries.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "common/status_macros.h"
#include "server/jobs/job_request.h"
#include "server/queries/derived_queries.h"
#include "server/queries/query_checks.h"
#include "server/queries/series_downsampling.h"
#include "server/queries/trajectory_projection.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server::queries {
namespace {

// Reads `query` (points stored since it was counted stop the read at the limit) and
// downsamples each of its series to `max_points`, appending to `result`.
absl::Status ReadAndDownsample(storage::MetricsStore& store, const storage::SeriesQuery& query,
                               int max_points, const RequestLimits& limits,
                               storage::SeriesResult* result, bool* downsampled) {
  ASSIGN_OR_RETURN(storage::SeriesResult read, store.QuerySeries(query));
  if (read.more) return SeriesReadStopped(limits);
  *downsampled = DownsampleSeries(max_points, &read.points) || *downsampled;
  result->points.insert(result->points.end(), read.points.begin(), read.points.end());
  return CheckSeriesPoints(static_cast<int64_t>(result->points.size()), limits);
}

// The points of `query` (a per-head or per-hidden-state metric), each series downsampled to
// `max_points`; `downsampled` tells whether one was. The answer's size is known from the
// store's count before any point is read: past `limits` nothing is read. What is read at
// once never passes the limit either: a query that does only before downsampling is read a
// layer at a time, or a series at a time where a layer passes it.
absl::StatusOr<storage::SeriesResult> ReadSeries(storage::MetricsStore& store,
                                                 storage::SeriesQuery query, int max_points,
                                                 const RequestLimits& limits, bool* downsampled) {
  ASSIGN_OR_RETURN(const storage::SeriesCounts counts, store.CountSeries(query));
  int64_t matched = 0;
  int64_t answered = 0;
  std::map<int, int64_t> by_layer;
  for (const storage::SeriesCount& series : counts.series) {
    matched += series.points;
    answered += DownsampledSize(series.points, max_points);
    by_layer[series.layer] += series.points;
  }
  RETURN_IF_ERROR(CheckSeriesPoints(answered, limits));
  storage::SeriesResult result;
  result.probe_id = counts.probe_id;
  query.probe_id = counts.probe_id;
  query.limit = limits.max_series_points;
  if (matched <= limits.max_series_points) {
    RETURN_IF_ERROR(ReadAndDownsample(store, query, max_points, limits, &result, downsampled));
    return result;
  }
  for (const auto& [layer, points] : by_layer) {
    query.layer = layer;
    if (points <= limits.max_series_points) {
      RETURN_IF_ERROR(ReadAndDownsample(store, query, max_points, limits, &result, downsampled));
      continue;
    }
    for (const storage::SeriesCount& series : counts.series) {
      if (series.layer != layer) continue;
      RETURN_IF_ERROR(CheckSeriesRead(series.layer, series.head, series.points, limits));
      storage::SeriesQuery one = query;
      one.head = series.head;
      RETURN_IF_ERROR(ReadAndDownsample(store, one, max_points, limits, &result, downsampled));
    }
  }
  return result;
}

}  // namespace

absl::Status ValidateJobId(int64_t id) {
  if (id <= 0) return absl::InvalidArgumentError(absl::StrCat("job id must be > 0, got ", id));
  return absl::OkStatus();
}

absl::StatusOr<storage::JobRecord> JobInNamespace(JobRunner& runner, const std::string& ns,
                                                  int64_t id) {
  RETURN_IF_ERROR(ValidateJobId(id));
  ASSIGN_OR_RETURN(storage::JobRecord job, runner.Get(id));
  if (job.spec.ns != ns) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return job;
}

absl::StatusOr<pb::ListRunsResponse> ListRuns(storage::MetricsStore& store, const std::string& ns,
                                              const pb::ListRunsRequest& /*request*/) {
  ASSIGN_OR_RETURN(const std::vector<storage::RunInfo> runs, store.ListRuns(ns));
  pb::ListRunsResponse response;
  for (const storage::RunInfo& run : runs) ToProto(run, response.add_runs());
  return response;
}

absl::StatusOr<pb::ListAlarmsResponse> ListAlarms(storage::MetricsStore& store,
                                                  const std::string& ns,
                                                  const pb::ListAlarmsRequest& request) {
  if (!request.run().empty()) {
    RETURN_IF_ERROR(ValidateRunName(request.run()));
    RETURN_IF_ERROR(store.GetRun(ns, request.run()).status());  // NOT_FOUND naming the runs
  }
  if (request.since_revision() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("since_revision must be >= 0, not ", request.since_revision()));
  }
  if (request.limit() < 0 || request.limit() > kMaxAlarmsListed) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be 0 to ", kMaxAlarmsListed, " (0: 1000), not ", request.limit()));
  }
  storage::AlarmQuery query;
  query.ns = ns;
  query.run = request.run();
  query.since_revision = request.since_revision();
  query.limit = request.limit();
  switch (request.state()) {
    case pb::ALARM_STATE_FIRING:
      query.firing = true;
      break;
    case pb::ALARM_STATE_RESOLVED:
      query.firing = false;
      break;
    case pb::ALARM_STATE_UNSPECIFIED:
    case pb::AlarmState_INT_MIN_SENTINEL_DO_NOT_USE_:
    case pb::AlarmState_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;  // any state, as for a value this server does not know
  }
  ASSIGN_OR_RETURN(const storage::AlarmList list, store.ListAlarms(query));
  pb::ListAlarmsResponse response;
  for (const storage::AlarmRecord& alarm : list.alarms) ToProto(alarm, response.add_alarms());
  response.set_more(list.more);
  return response;
}

absl::StatusOr<pb::QuerySeriesResponse> QuerySeries(storage::MetricsStore& store,
                                                    const std::string& ns,
                                                    const pb::QuerySeriesRequest& request,
                                                    const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  if (request.metric().empty()) return absl::InvalidArgumentError("metric is required");
  RETURN_IF_ERROR(ValidateStepRange(request.has_from_step(), request.from_step(),
                                    request.has_to_step(), request.to_step()));
  if (request.max_points() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_points must be >= 0, got ", request.max_points()));
  }
  const std::optional<analysis::MetricScope> scope = analysis::ScopeOfMetric(request.metric());
  if (!scope.has_value()) return UnknownMetricError(request.metric());
  const bool per_hidden_state = scope == analysis::MetricScope::kHiddenState;
  if (per_hidden_state && request.has_head()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric '", request.metric(), "' is measured per hidden state, not per head: no head"));
  }
  if (scope == analysis::MetricScope::kCheckpoint && (request.has_layer() || request.has_head())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric '", request.metric(), "' is measured per checkpoint: no layer or head"));
  }
  if (scope == analysis::MetricScope::kBlock && request.has_head()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric '", request.metric(), "' is measured per block, over all its heads: no head"));
  }
  if (request.has_layer() || request.has_head()) {
    RETURN_IF_ERROR(
        ValidateAgainstRun(
            store, ns, request.run(),
            request.has_layer() ? std::optional<int32_t>(request.layer()) : std::nullopt,
            request.has_head() ? std::optional<int32_t>(request.head()) : std::nullopt,
            per_hidden_state)
            .status());
  }
  storage::SeriesQuery query = FromProto(request);
  query.ns = ns;
  query.defined_metric = scope.has_value();
  bool downsampled = false;
  storage::SeriesResult result;
  if (scope == analysis::MetricScope::kBlock) {
    ASSIGN_OR_RETURN(result, PerBlockSeries(store, query, limits));
    downsampled = DownsampleSeries(request.max_points(), &result.points);
    RETURN_IF_ERROR(CheckSeriesPoints(static_cast<int64_t>(result.points.size()), limits));
  } else {
    ASSIGN_OR_RETURN(result, ReadSeries(store, query, request.max_points(), limits, &downsampled));
  }
  pb::QuerySeriesResponse response;
  ToProto(result, request.metric(), &response);
  response.set_downsampled(downsampled);
  return response;
}

absl::StatusOr<pb::QueryVectorsResponse> QueryVectors(storage::MetricsStore& store,
                                                      const std::string& ns,
                                                      const pb::QueryVectorsRequest& request,
                                                      const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  const std::optional<analysis::MetricScope> scope = analysis::ScopeOfVectorKind(request.kind());
  if (!scope.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("kind must be one of ",
                                                   absl::StrJoin(analysis::AllVectorKinds(), ", "),
                                                   "; got '", request.kind(), "'"));
  }
  RETURN_IF_ERROR(ValidateStepRange(request.has_from_step(), request.from_step(),
                                    request.has_to_step(), request.to_step()));
  storage::VectorQuery query = FromProto(request);
  switch (*scope) {
    case analysis::MetricScope::kHead:
      RETURN_IF_ERROR(ValidateHead(request.layer(), request.head()));
      RETURN_IF_ERROR(
          ValidateAgainstRun(store, ns, request.run(), request.layer(), request.head(), false)
              .status());
      break;
    case analysis::MetricScope::kHiddenState:
      RETURN_IF_ERROR(
          ValidateAgainstRun(store, ns, request.run(), request.layer(), std::nullopt, true)
              .status());
      query.head = -1;
      break;
    case analysis::MetricScope::kCheckpoint:
    case analysis::MetricScope::kBlock:  // no vector kind has it
      query.layer = -1;
      query.head = -1;
      break;
  }
  query.ns = ns;
  VectorBudget budget(limits, "the vector query");
  query.max_values = budget.left();
  ASSIGN_OR_RETURN(const storage::VectorResult result, store.QueryVectors(query));
  RETURN_IF_ERROR(budget.Spend(result.values));
  pb::QueryVectorsResponse response;
  ToProto(result, &response);
  return response;
}

absl::StatusOr<pb::QueryTrajectoryResponse> QueryTrajectory(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryTrajectoryRequest& request,
    const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  RETURN_IF_ERROR(ValidateHead(request.layer(), request.head()));
  RETURN_IF_ERROR(
      ValidateAgainstRun(store, ns, request.run(), request.layer(), request.head(), false)
          .status());
  VectorBudget budget(limits, "the trajectory query");
  ASSIGN_OR_RETURN(QkVectorSeries means,
                   ReadHeadQkVectors(store, ns, request.run(), request.probe_id(), "q_mean",
                                     "k_mean", request.layer(), request.head(), &budget));
  std::vector<int64_t> steps;
  std::vector<std::vector<double>> rows;  // Q̄ rows, then K̄ rows
  std::vector<std::vector<double>> k_rows;
  for (QkVectors& step : means.steps) {
    steps.push_back(step.step);
    rows.push_back(std::move(step.q));
    k_rows.push_back(std::move(step.k));
  }
  if (steps.empty()) {
    return absl::NotFoundError(absl::StrCat("run '", request.run(), "' has no q_mean/k_mean ",
                                            "vectors for layer ", request.layer(), " head ",
                                            request.head()));
  }
  const size_t num_steps = steps.size();
  for (std::vector<double>& row : k_rows) rows.push_back(std::move(row));
  absl::StatusOr<TopTwoProjection> projection = ProjectOnTopTwo(rows);
  if (!projection.ok()) {
    return absl::Status(projection.status().code(),
                        absl::StrCat("run '", request.run(), "' layer ", request.layer(), " head ",
                                     request.head(), ": ", projection.status().message()));
  }
  pb::QueryTrajectoryResponse response;
  response.set_probe_id(means.probe_id);
  for (size_t i = 0; i < num_steps; ++i) {
    pb::TrajectoryPoint* point = response.add_points();
    point->set_step(steps[i]);
    point->set_q_x(projection->coordinates[i][0]);
    point->set_q_y(projection->coordinates[i][1]);
    point->set_k_x(projection->coordinates[num_steps + i][0]);
    point->set_k_y(projection->coordinates[num_steps + i][1]);
  }
  response.mutable_singular_values()->Add(projection->singular_values.begin(),
                                          projection->singular_values.end());
  response.set_explained_variance(projection->explained_variance);
  response.set_basis(absl::StrCat(
      "top-2 right singular vectors of the uncentered stack of this head's ", num_steps,
      " Q\u0304 and ", num_steps,
      " K\u0304 vectors (SVD, server-side; each oriented so that the coordinates sum to >= 0)"));
  return response;
}

pb::ListMetricsResponse ListMetrics(const pb::ListMetricsRequest& /*request*/) {
  pb::ListMetricsResponse response;
  for (const analysis::MetricInfo& info : analysis::MetricCatalog()) {
    pb::MetricInfo* metric = response.add_metrics();
    metric->set_name(info.name);
    metric->set_scope(std::string(analysis::MetricScopeName(info.scope)));
    metric->set_kind(std::string(analysis::MetricKindName(info.kind)));
    metric->set_group(std::string(analysis::MetricGroupName(info.group)));
    metric->set_families(std::string(analysis::MetricFamiliesName(info.families)));
    metric->set_token_sample(info.token_sample);
    metric->set_derived(info.derived);
    metric->set_may_be_undefined(info.may_be_undefined);
    metric->set_baseline(info.baseline);
    metric->set_label(info.label);
    metric->set_unit(info.unit);
    metric->set_definition(info.definition);
    metric->set_meaning(info.meaning);
  }
  for (const analysis::NamedMetricGroup& named : analysis::AllMetricGroups()) {
    pb::MetricGroupInfo* group = response.add_groups();
    group->set_name(named.name);
    group->set_summary(named.summary);
    for (const analysis::MetricInfo& info : analysis::MetricCatalog()) {
      if (info.group == named.group) group->add_metrics(info.name);
    }
  }
  return response;
}

absl::StatusOr<pb::ListJobsResponse> ListJobs(JobRunner& runner, const std::string& ns,
                                              const pb::ListJobsRequest& request) {
  if (request.limit() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit must be >= 0, got ", request.limit()));
  }
  if (!request.run().empty()) RETURN_IF_ERROR(ValidateRunName(request.run()));
  ASSIGN_OR_RETURN(const std::vector<storage::JobRecord> jobs,
                   runner.List(request.limit() == 0 ? 100 : request.limit(), ns, request.run()));
  pb::ListJobsResponse response;
  for (const storage::JobRecord& job : jobs) ToProto(job, response.add_jobs());
  return response;
}

absl::StatusOr<pb::Job> GetJob(JobRunner& runner, const std::string& ns,
                               const pb::GetJobRequest& request) {
  ASSIGN_OR_RETURN(const storage::JobRecord job, JobInNamespace(runner, ns, request.id()));
  pb::Job response;
  ToProto(job, &response);
  return response;
}

}  // namespace anisoscope::server::queries
