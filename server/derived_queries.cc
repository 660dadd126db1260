#include "server/derived_queries.h"

#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/job_request.h"
#include "server/query_checks.h"
#include "server/statistical_tests.h"
#include "server/trajectory_projection.h"

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
                             int layer, int head, std::string* probe_id,
                             std::map<int64_t, ConcatenatedMeans>* by_step) {
  ASSIGN_OR_RETURN(const storage::VectorResult q,
                   ReadHeadVectors(store, query.ns, query.run, query.probe_id, "q_mean", layer,
                                   head, query.from_step, query.to_step));
  ASSIGN_OR_RETURN(const storage::VectorResult k,
                   ReadHeadVectors(store, query.ns, query.run, query.probe_id, "k_mean", layer,
                                   head, query.from_step, query.to_step));
  *probe_id = q.probe_id;
  std::map<int64_t, const std::vector<double>*> k_by_step;
  for (const storage::VectorPoint& point : k.points) k_by_step[point.step] = &point.values;
  for (const storage::VectorPoint& point : q.points) {
    auto k_values = k_by_step.find(point.step);
    ConcatenatedMeans& means = (*by_step)[point.step];
    if (k_values == k_by_step.end() || means.heads != head) continue;  // a head missing
    means.q.insert(means.q.end(), point.values.begin(), point.values.end());
    means.k.insert(means.k.end(), k_values->second->begin(), k_values->second->end());
    ++means.heads;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseBasis(const std::string& basis) {
  if (basis.empty() || basis == "union") return std::string("union");
  if (basis == "q" || basis == "k") return basis;
  return absl::InvalidArgumentError(absl::StrCat("basis must be union, q or k; got '", basis, "'"));
}

// The token samples of one step: M rows of d_h values, Q's and K's.
struct StepSamples {
  int64_t step = 0;
  const std::vector<double>* q = nullptr;
  const std::vector<double>* k = nullptr;
};

// The steps with both samples, ascending; FAILED_PRECONDITION unless every one holds the
// same M x head_dim values.
absl::StatusOr<std::vector<StepSamples>> PairSamples(const storage::VectorResult& q,
                                                     const storage::VectorResult& k, int head_dim,
                                                     int64_t* samples) {
  std::map<int64_t, const std::vector<double>*> k_by_step;
  for (const storage::VectorPoint& point : k.points) k_by_step[point.step] = &point.values;
  std::vector<StepSamples> steps;
  for (const storage::VectorPoint& point : q.points) {
    auto it = k_by_step.find(point.step);
    if (it == k_by_step.end()) continue;
    const size_t size = point.values.size();
    if (size % head_dim != 0 || it->second->size() != size ||
        (!steps.empty() && steps.front().q->size() != size)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", point.step, " stores ", size, " q_sample and ", it->second->size(),
          " k_sample values",
          steps.empty() ? ""
                        : absl::StrCat(", step ", steps.front().step, " ", steps.front().q->size()),
          " (head_dim ", head_dim,
          "): its job kept a different number of token samples, so "
          "the clouds are not of the same tokens"));
    }
    steps.push_back({point.step, &point.values, it->second});
  }
  if (!steps.empty()) *samples = static_cast<int64_t>(steps.front().q->size()) / head_dim;
  return steps;
}

}  // namespace

absl::StatusOr<storage::SeriesResult> PerBlockSeries(storage::MetricsStore& store,
                                                     const storage::SeriesQuery& query) {
  ASSIGN_OR_RETURN(const storage::RunInfo run, store.GetRun(query.ns, query.run));
  storage::SeriesResult result;
  const int first = query.layer.value_or(0);
  const int last = query.layer.has_value() ? *query.layer : run.num_layers - 1;
  for (int layer = first; layer <= last; ++layer) {
    std::map<int64_t, ConcatenatedMeans> by_step;
    for (int head = 0; head < run.num_heads; ++head) {
      RETURN_IF_ERROR(AppendHeadMeans(store, query, layer, head, &result.probe_id, &by_step));
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
    storage::MetricsStore& store, const std::string& ns,
    const pb::QueryTokenCloudRequest& request) {
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
  absl::StatusOr<storage::VectorResult> q = ReadHeadVectors(
      store, ns, request.run(), request.probe_id(), "q_sample", request.layer(), request.head());
  absl::StatusOr<storage::VectorResult> k = ReadHeadVectors(
      store, ns, request.run(), request.probe_id(), "k_sample", request.layer(), request.head());
  for (const auto* read : {&q, &k}) {
    if (absl::IsInvalidArgument(read->status())) return none;  // the run has no such kind
    RETURN_IF_ERROR(read->status());
  }
  const size_t d = static_cast<size_t>(run.head_dim);
  int64_t samples = 0;
  ASSIGN_OR_RETURN(const std::vector<StepSamples> steps,
                   PairSamples(*q, *k, run.head_dim, &samples));
  if (steps.empty()) return none;
  std::vector<std::vector<double>> rows;
  for (const bool is_q : {true, false}) {
    if (basis != "union" && basis != (is_q ? "q" : "k")) continue;
    for (const StepSamples& step : steps) {
      const std::vector<double>& values = is_q ? *step.q : *step.k;
      for (int64_t j = 0; j < samples; ++j) {
        rows.emplace_back(values.begin() + j * d, values.begin() + (j + 1) * d);
      }
    }
  }
  ASSIGN_OR_RETURN(const TopTwoProjection projection, ProjectOnTopTwo(rows));

  pb::QueryTokenCloudResponse response;
  response.set_probe_id(q->probe_id);
  response.set_basis(basis);
  response.set_token_samples(static_cast<int32_t>(samples));
  for (const StepSamples& step : steps) {
    pb::TokenCloudStep* cloud = response.add_steps();
    cloud->set_step(step.step);
    for (int64_t j = 0; j < samples; ++j) {
      const double* q_row = step.q->data() + j * d;
      const double* k_row = step.k->data() + j * d;
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
    storage::MetricsStore& store, const std::string& ns,
    const pb::QueryCorrelationRequest& request) {
  RETURN_IF_ERROR(ValidateRunName(request.run()));
  RETURN_IF_ERROR(ValidateStepRange(request.has_from_step(), request.from_step(),
                                    request.has_to_step(), request.to_step()));
  storage::SeriesQuery query;
  query.ns = ns;
  query.run = request.run();
  query.probe_id = request.probe_id();
  if (request.has_from_step()) query.from_step = request.from_step();
  if (request.has_to_step()) query.to_step = request.to_step();
  // Per step, per hidden state: (x, y).
  std::map<int64_t, std::map<int, std::pair<std::optional<double>, std::optional<double>>>> values;
  pb::QueryCorrelationResponse response;
  for (const char* metric : {kNormMetric, kAnisotropyMetric}) {
    query.metric = metric;
    ASSIGN_OR_RETURN(const storage::SeriesResult series, store.QuerySeries(query));
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
