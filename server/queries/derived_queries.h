// The query core's derived analyses (docs/metrics.md "Derived analyses"): what is computed
// at query time from stored metrics, never stored itself. Errors as in server/queries/queries.h.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {
namespace pb = ::anisoscope::v1;
}  // namespace anisoscope::server

namespace anisoscope::server::queries {

// The series of a per-block metric (analysis::PerBlockMetricNames: qk_mean_cosine_concat)
// from the stored q_mean and k_mean of every head of each block (`query.layer`'s, or all),
// at the steps where every head has both. Points ordered by layer, step; head -1. The
// vectors of one block are read together, at most `limits.max_vector_values` of them.
absl::StatusOr<storage::SeriesResult> PerBlockSeries(storage::MetricsStore& store,
                                                     const storage::SeriesQuery& query,
                                                     const RequestLimits& limits);

// Every stored q_sample and k_sample of the head projected on the top two right singular
// vectors of the uncentered stack the basis names (server/queries/trajectory_projection.h).
// NOT_FOUND when the head has no token samples; FAILED_PRECONDITION when its steps kept
// different numbers of them; RESOURCE_EXHAUSTED, before reading them, when the samples pass
// `limits.max_vector_values`.
absl::StatusOr<pb::QueryTokenCloudResponse> QueryTokenCloud(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryTokenCloudRequest& request,
    const RequestLimits& limits);

// Per step: Spearman's and Pearson's tests of hidden_mean_norm against hidden_anisotropy
// over the hidden states (server/queries/correlation_statistics.h). RESOURCE_EXHAUSTED when either
// series passes `limits.max_series_points` (the read stops there).
absl::StatusOr<pb::QueryCorrelationResponse> QueryCorrelation(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryCorrelationRequest& request,
    const RequestLimits& limits);

// INVALID_ARGUMENT unless 2 <= dimension <= 2^24.
absl::StatusOr<pb::QueryIsotropicBaselineResponse> QueryIsotropicBaseline(
    const pb::QueryIsotropicBaselineRequest& request);

}  // namespace anisoscope::server::queries
