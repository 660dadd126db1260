#include "server/queries/query_checks.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "common/close_names.h"
#include "common/status_macros.h"

namespace anisoscope::server::queries {

absl::Status ValidateStepRange(bool has_from, int64_t from, bool has_to, int64_t to) {
  if (has_from && has_to && from > to) {
    return absl::InvalidArgumentError(absl::StrCat("from_step ", from, " is after to_step ", to));
  }
  return absl::OkStatus();
}

absl::Status UnknownMetricError(const std::string& metric) {
  std::vector<std::string> known;
  for (const analysis::MetricScope scope :
       {analysis::MetricScope::kHead, analysis::MetricScope::kHiddenState,
        analysis::MetricScope::kBlock, analysis::MetricScope::kCheckpoint}) {
    for (std::string& name : analysis::CatalogNames(scope, analysis::MetricKind::kScalar)) {
      known.push_back(std::move(name));
    }
  }
  const std::vector<std::string> close = CloseNames(metric, known);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown metric '", metric, "'; ",
      close.empty() ? "" : absl::StrCat("did you mean '", absl::StrJoin(close, "' or '"), "'? "),
      "known metrics: ", absl::StrJoin(known, ", "), " ('anisoscope metrics' defines each)"));
}

absl::Status ValidateHead(int32_t layer, int32_t head) {
  if (layer < 0 || head < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer and head must be >= 0, got layer ", layer, " head ", head));
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::RunInfo> ValidateAgainstRun(storage::MetricsStore& store,
                                                    const std::string& ns, const std::string& run,
                                                    std::optional<int32_t> layer,
                                                    std::optional<int32_t> head,
                                                    bool per_hidden_state) {
  ASSIGN_OR_RETURN(storage::RunInfo info, store.GetRun(ns, run));
  const int layers = info.num_layers + (per_hidden_state ? 1 : 0);
  if (layer.has_value() && (*layer < 0 || *layer >= layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", *layer, " is out of range: run '", run, "' has ",
                     per_hidden_state ? "hidden states" : "layers", " 0..", layers - 1,
                     per_hidden_state ? " (0: the embeddings)" : ""));
  }
  if (head.has_value() && (*head < 0 || *head >= info.num_heads)) {
    return absl::InvalidArgumentError(absl::StrCat("head ", *head, " is out of range: run '", run,
                                                   "' has heads 0..", info.num_heads - 1));
  }
  return info;
}

absl::StatusOr<QkVectorSeries> ReadHeadQkVectors(
    storage::MetricsStore& store, const std::string& ns, const std::string& run,
    const std::string& probe_id, const std::string& q_kind, const std::string& k_kind,
    int32_t layer, int32_t head, VectorBudget* budget, std::optional<int64_t> from_step,
    std::optional<int64_t> to_step) {
  storage::VectorQuery query;
  query.ns = ns;
  query.run = run;
  query.probe_id = probe_id;
  query.layer = layer;
  query.head = head;
  query.from_step = from_step;
  query.to_step = to_step;
  query.kind = q_kind;
  query.max_values = budget->left();
  ASSIGN_OR_RETURN(storage::VectorResult q, store.QueryVectors(query));
  RETURN_IF_ERROR(budget->Spend(q.values));
  query.kind = k_kind;
  query.max_values = budget->left();
  ASSIGN_OR_RETURN(storage::VectorResult k, store.QueryVectors(query));
  RETURN_IF_ERROR(budget->Spend(k.values));
  std::map<int64_t, std::vector<double>*> k_by_step;
  for (storage::VectorPoint& point : k.points) k_by_step[point.step] = &point.values;
  QkVectorSeries series;
  series.probe_id = q.probe_id;
  for (storage::VectorPoint& point : q.points) {
    auto it = k_by_step.find(point.step);
    if (it == k_by_step.end()) continue;
    series.steps.push_back({point.step, std::move(point.values), std::move(*it->second)});
  }
  return series;
}

}  // namespace anisoscope::server::queries
