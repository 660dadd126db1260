// The request checks and reads shared by the query core's files (queries.cc for what is
// stored, derived_queries.cc for what is computed from it). Each error is INVALID_ARGUMENT
// naming the field, or the store's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server::queries {

absl::Status ValidateStepRange(bool has_from, int64_t from, bool has_to, int64_t to);
// INVALID_ARGUMENT for `metric`, a name the metric catalogue has no scalar of: "unknown
// metric 'M'; did you mean 'N'? known metrics: ..." (the close names by edit distance, then
// every scalar's name, from analysis/metric_catalog/metric_catalog.h).
absl::Status UnknownMetricError(const std::string& metric);
// Both >= 0.
absl::Status ValidateHead(int32_t layer, int32_t head);
// `layer` and `head` (when given) inside run `run`'s shape. A per-hidden-state quantity
// (`per_hidden_state`) has layers 0..num_layers and no heads. Returns the run.
absl::StatusOr<storage::RunInfo> ValidateAgainstRun(storage::MetricsStore& store,
                                                    const std::string& ns, const std::string& run,
                                                    std::optional<int32_t> layer,
                                                    std::optional<int32_t> head,
                                                    bool per_hidden_state);

// One head's stored Q and K vectors of one sort (q_mean and k_mean, q_sample and k_sample)
// at one step.
struct QkVectors {
  int64_t step = 0;
  std::vector<double> q;
  std::vector<double> k;
};
struct QkVectorSeries {
  std::string probe_id;
  std::vector<QkVectors> steps;  // ascending; only the steps that store both
};

// Kinds `q_kind` and `k_kind` of one head at every step in [from_step, to_step] that has
// both; the store's errors (INVALID_ARGUMENT for a kind the run does not have). Each kind's
// size is spent from `budget` before it is read (RESOURCE_EXHAUSTED, nothing read, when
// it passes).
absl::StatusOr<QkVectorSeries> ReadHeadQkVectors(
    storage::MetricsStore& store, const std::string& ns, const std::string& run,
    const std::string& probe_id, const std::string& q_kind, const std::string& k_kind,
    int32_t layer, int32_t head, VectorBudget* budget,
    std::optional<int64_t> from_step = std::nullopt, std::optional<int64_t> to_step = std::nullopt);

}  // namespace anisoscope::server::queries
