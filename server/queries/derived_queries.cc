#include "server/queries/derived_queries.h"

#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/jobs/job_request.h"
#include "server/queries/correlation_statistics.h"
#include "server/queries/query_checks.h"
#include "server/queries/trajectory_projection.h"

namespace anisoscope::server::queries {
namespace {

constexpr char kNormMetric[] = "hidden_mean_norm";
constexpr char kAnisotropyMetric[] = "hidden_anisotropy";
constexpr int kMaxDimension = 1 << 24;

double Dot(const double* a, const double* b, size_t n) {
  return std::inner_product(a, a + n, b, 0.0);
}

double Cosine(const std::vector<double>& a, const std::vector<double>& b) {
  const double norms =
      std::sqrt(Dot(a.data(), a.data(), a.size()) * Dot(b.data(), b.data(), b.size()));
  return norms > 0 ? Dot(a.data(), b.data(), a.size()) / norms : 0.0;
}

// The concatenation over heads of one block's q_mean and k_mean, per step.
struct ConcatenatedMeans {
  std::vector<double> q;
  std::vector<double> k;
  int heads = 0;  // how many heads have added both so far
};

absl::Status AppendHeadMeans(storage::MetricsStore& store, const storage::SeriesQuery& query,
                             int layer, int head, VectorBudget* budget, std::string* probe_id,
                             std::map<int64_t, ConcatenatedMeans>* by_step) {
  ASSIGN_OR_RETURN(const QkVectorSeries head_means,
                   ReadHeadQkVectors(store, query.ns, query.run, query.probe_id, "q_mean", "k_mean",
                                     layer, head, budget, query.from_step, query.to_step));
  *probe_id = head_means.probe_id;
  for (const QkVectors& step : head_means.steps) {
    ConcatenatedMeans& means = (*by_step)[step.step];
    if (means.heads != head) continue;  // an earlier head lacks this step
    means.q.insert(means.q.end(), step.q.begin(), step.q.end());
    means.k.insert(means.k.end(), step.k.begin(), step.k.end());
    ++means.heads;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseBasis(const std::string& basis) {
  if (basis.empty() || basis == "union") return std::string("union");
  if (basis == "q" || basis == "k") return basis;
  return absl::InvalidArgumentError(absl::StrCat("basis must be union, q or k; got '", basis, "'"));
}

// M, the samples of every step (M x head_dim values each of Q and K); FAILED_PRECONDITION
// unless every step holds the same number.
absl::StatusOr<int64_t> SamplesPerStep(const std::vector<QkVectors>& steps, int head_dim) {
  for (const QkVectors& step : steps) {
    const size_t size = step.q.size();
    if (size % head_dim != 0 || step.k.size() != size || steps.front().q.size() != size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step.step, " stores ", size, " q_sample and ", step.k.size(),
          " k_sample values, step ", steps.front().step, " ", steps.front().q.size(), " (head_dim ",
          head_dim,
          "): its job kept a different number of token samples, so the clouds are not of the "
          "same tokens"));
    }
  }
  return steps.empty() ? 0 : static_cast<int64_t>(steps.front().q.size()) / head_dim;
}

}  // namespace

absl::StatusOr<storage::SeriesResult> PerBlockSeries(storage::MetricsStore& store,
                                                     const storage::SeriesQuery& query,
                                                     const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const storage::RunInfo run, store.GetRun(query.ns, query.run));
  storage::SeriesResult result;
  const int first = query.layer.value_or(0);
  const int last = query.layer.has_value() ? *query.layer : run.num_layers - 1;
  for (int layer = first; layer <= last; ++layer) {
    std::map<int64_t, ConcatenatedMeans> by_step;
    VectorBudget budget(limits, absl::StrCat("the per-block series of layer ", layer));
    for (int head = 0; head < run.num_heads; ++head) {
      RETURN_IF_ERROR(
          AppendHeadMeans(store, query, layer, head, &budget, &result.probe_id, &by_step));
    }
    for (const auto& [step, means] : by_step) {
      if (means.heads != run.num_heads) continue;
      if (query.after_step.has_value() && step <= *query.after_step) continue;
      result.points.push_back({step, layer, -1, Cosine(means.q, means.k)});
    }
  }
  return result;
}

absl::StatusOr<pb::QueryTokenCloudResponse> QueryTokenCloud(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryTokenCloudRequest& request,
    const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  RETURN_IF_ERROR(ValidateHead(request.layer(), request.head()));
  ASSIGN_OR_RETURN(const std::string basis, ParseBasis(request.basis()));
  ASSIGN_OR_RETURN(
      const storage::RunInfo run,
      ValidateAgainstRun(store, ns, request.run(), request.layer(), request.head(), false));
  const absl::Status none = absl::NotFoundError(absl::StrCat(
      "run '", request.run(), "' has no token samples (q_sample, k_sample) for layer ",
      request.layer(), " head ", request.head(),
      ": its jobs kept none (--token-samples 0) or ran before anisoscope stored them"));
  VectorBudget budget(limits, "the token cloud query");
  absl::StatusOr<QkVectorSeries> read =
      ReadHeadQkVectors(store, ns, request.run(), request.probe_id(), "q_sample", "k_sample",
                        request.layer(), request.head(), &budget);
  if (absl::IsInvalidArgument(read.status())) return none;  // the run has no such kind
  RETURN_IF_ERROR(read.status());
  const std::vector<QkVectors>& steps = read->steps;
  if (steps.empty()) return none;
  const size_t d = static_cast<size_t>(run.head_dim);
  ASSIGN_OR_RETURN(const int64_t samples, SamplesPerStep(steps, run.head_dim));
  std::vector<std::vector<double>> rows;
  for (const bool is_q : {true, false}) {
    if (basis != "union" && basis != (is_q ? "q" : "k")) continue;
    for (const QkVectors& step : steps) {
      const std::vector<double>& values = is_q ? step.q : step.k;
      for (int64_t j = 0; j < samples; ++j) {
        rows.emplace_back(values.begin() + j * d, values.begin() + (j + 1) * d);
      }
    }
  }
  ASSIGN_OR_RETURN(const TopTwoProjection projection, ProjectOnTopTwo(rows));

  pb::QueryTokenCloudResponse response;
  response.set_probe_id(read->probe_id);
  response.set_basis(basis);
  response.set_token_samples(static_cast<int32_t>(samples));
  for (const QkVectors& step : steps) {
    pb::TokenCloudStep* cloud = response.add_steps();
    cloud->set_step(step.step);
    for (int64_t j = 0; j < samples; ++j) {
      const double* q_row = step.q.data() + j * d;
      const double* k_row = step.k.data() + j * d;
      cloud->add_q_x(Dot(q_row, projection.basis[0].data(), d));
      cloud->add_q_y(Dot(q_row, projection.basis[1].data(), d));
      cloud->add_k_x(Dot(k_row, projection.basis[0].data(), d));
      cloud->add_k_y(Dot(k_row, projection.basis[1].data(), d));
    }
  }
  response.mutable_singular_values()->Add(projection.singular_values.begin(),
                                          projection.singular_values.end());
  response.set_explained_variance(projection.explained_variance);
  const std::string stacked = basis == "union" ? "Q and K" : (basis == "q" ? "Q" : "K");
  response.set_description(absl::StrCat(
      "top-2 right singular vectors of the uncentered stack of this head's ", stacked,
      " token samples (", samples, " tokens x ", steps.size(),
      " steps each; SVD, server-side; each oriented so that the coordinates sum to >= 0)"));
  return response;
}

absl::StatusOr<pb::QueryCorrelationResponse> QueryCorrelation(
    storage::MetricsStore& store, const std::string& ns, const pb::QueryCorrelationRequest& request,
    const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  RETURN_IF_ERROR(ValidateStepRange(request.has_from_step(), request.from_step(),
                                    request.has_to_step(), request.to_step()));
  storage::SeriesQuery query;
  query.ns = ns;
  query.run = request.run();
  query.probe_id = request.probe_id();
  if (request.has_from_step()) query.from_step = request.from_step();
  if (request.has_to_step()) query.to_step = request.to_step();
  query.limit = limits.max_series_points;
  // Per step, per hidden state: (x, y).
  std::map<int64_t, std::map<int, std::pair<std::optional<double>, std::optional<double>>>> values;
  pb::QueryCorrelationResponse response;
  for (const char* metric : {kNormMetric, kAnisotropyMetric}) {
    query.metric = metric;
    ASSIGN_OR_RETURN(const storage::SeriesResult series, store.QuerySeries(query));
    if (series.more) return SeriesReadStopped(limits);
    response.set_probe_id(series.probe_id);
    for (const storage::SeriesPoint& point : series.points) {
      auto& pair = values[point.step][point.layer];
      (metric == kNormMetric ? pair.first : pair.second) = point.value;
    }
  }
  response.set_x_metric(kNormMetric);
  response.set_y_metric(kAnisotropyMetric);
  for (const auto& [step, layers] : values) {
    std::vector<double> x;
    std::vector<double> y;
    for (const auto& [layer, pair] : layers) {
      if (!pair.first.has_value() || !pair.second.has_value()) continue;
      x.push_back(*pair.first);
      y.push_back(*pair.second);
    }
    if (x.size() < 2) continue;
    const CorrelationTest spearman = SpearmanTest(x, y);
    const CorrelationTest pearson = PearsonTest(x, y);
    pb::CorrelationPoint* point = response.add_points();
    point->set_step(step);
    point->set_hidden_states(static_cast<int32_t>(x.size()));
    point->set_spearman_rho(spearman.coefficient);
    point->set_spearman_p(spearman.p_value);
    point->set_pearson_r(pearson.coefficient);
    point->set_pearson_p(pearson.p_value);
  }
  return response;
}

absl::StatusOr<pb::QueryIsotropicBaselineResponse> QueryIsotropicBaseline(
    const pb::QueryIsotropicBaselineRequest& request) {
  if (request.dimension() < 2 || request.dimension() > kMaxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be in 2..", kMaxDimension, ", got ", request.dimension()));
  }
  pb::QueryIsotropicBaselineResponse response;
  response.set_dimension(request.dimension());
  response.set_cosine_p95(IsotropicCosineP95(request.dimension()));
  return response;
}

}  // namespace anisoscope::server::queries
