#include "server/jobs/step_upload.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/fingerprint.h"
#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/models/model_shape.h"
#include "analysis/probe/probe.h"
#include "common/status_macros.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

absl::Status Refuse(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("metrics.", field, ": ", why));
}

const std::string& BlockName(const pb::ScalarBlock& block) { return block.metric(); }
const std::string& BlockName(const pb::VectorBlock& block) { return block.kind(); }

absl::Status CheckShape(const pb::StepMetrics& metrics) {
  const std::vector<std::string>& families = analysis::ModelFamilies();
  if (std::find(families.begin(), families.end(), metrics.model_family()) == families.end()) {
    return Refuse("model_family", absl::StrCat("'", metrics.model_family().substr(0, 64),
                                               "' is not one of ", absl::StrJoin(families, ", ")));
  }
  const std::tuple<const char*, int, int> dimensions[] = {
      {"num_layers", metrics.num_layers(), kMaxLayers},
      {"num_heads", metrics.num_heads(), kMaxHeads},
      {"head_dim", metrics.head_dim(), kMaxHeadDim},
      {"hidden_size", metrics.hidden_size(), kMaxHiddenSize}};
  for (const auto& [name, value, most] : dimensions) {
    if (value < 1 || value > most) {
      return Refuse(name, absl::StrCat(value, " is outside 1..", most));
    }
  }
  return absl::OkStatus();
}

// Each value finite, or NaN where MayBeUndefined allows it (never ±inf).
template <typename Block>
absl::Status CheckValues(const google::protobuf::RepeatedPtrField<Block>& blocks,
                         const std::string& field) {
  for (int i = 0; i < blocks.size(); ++i) {
    const std::string& name = BlockName(blocks[i]);
    const bool nan_allowed = analysis::MayBeUndefined(name);
    const auto& values = blocks[i].values();
    for (int v = 0; v < values.size(); ++v) {
      const double value = values[v];
      if (std::isfinite(value) || (nan_allowed && std::isnan(value))) continue;
      return Refuse(absl::StrCat(field, "[", i, "] '", name, "'"),
                    absl::StrCat("value ", v, " is ", std::isnan(value) ? "NaN" : "infinite",
                                 nan_allowed ? "; METRICS.md allows NaN here but never infinity"
                                             : "; METRICS.md defines it as a finite number"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAllValues(const pb::StepMetrics& metrics) {
  RETURN_IF_ERROR(CheckValues(metrics.per_head(), "per_head"));
  RETURN_IF_ERROR(CheckValues(metrics.per_hidden_state(), "per_hidden_state"));
  RETURN_IF_ERROR(CheckValues(metrics.per_checkpoint(), "per_checkpoint"));
  RETURN_IF_ERROR(CheckValues(metrics.vectors(), "vectors"));
  RETURN_IF_ERROR(CheckValues(metrics.samples(), "samples"));
  RETURN_IF_ERROR(CheckValues(metrics.hidden_state_vectors(), "hidden_state_vectors"));
  return CheckValues(metrics.checkpoint_vectors(), "checkpoint_vectors");
}

// Checks that `blocks` name each of `required` once (plus any of `optional`), each with
// `size` values; calls `use(name, values)` for each.
template <typename Block, typename Use>
absl::Status CheckBlocks(const google::protobuf::RepeatedPtrField<Block>& blocks,
                         const std::string& field, const std::vector<std::string>& required,
                         const std::vector<std::string>& optional, size_t size, Use use) {
  std::set<std::string> seen;
  for (int i = 0; i < blocks.size(); ++i) {
    const Block& block = blocks[i];
    const std::string& name = BlockName(block);
    const std::string where = absl::StrCat(field, "[", i, "] '", name, "'");
    const bool known = std::find(required.begin(), required.end(), name) != required.end() ||
                       std::find(optional.begin(), optional.end(), name) != optional.end();
    if (!known) {
      return Refuse(where, absl::StrCat("unknown; expected ", absl::StrJoin(required, ", ")));
    }
    if (!seen.insert(name).second) return Refuse(where, "given twice");
    if (static_cast<size_t>(block.values_size()) != size) {
      return Refuse(where, absl::StrCat(block.values_size(), " values, the shape needs ", size));
    }
    use(name, block.values());
  }
  for (const std::string& name : required) {
    if (seen.count(name) == 0) return Refuse(field, absl::StrCat("'", name, "' is missing"));
  }
  return absl::OkStatus();
}

// Empty (a worker that does not hash) or the form analysis/checkpoint/fingerprint.h gives.
absl::Status CheckFingerprint(const std::string& fingerprint) {
  if (fingerprint.empty() || analysis::IsFingerprint(fingerprint)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("fingerprint '", fingerprint.substr(0, 64),
                                                 "' is not \"xxh3-128:\" and 32 hex digits"));
}

absl::Status CheckProbe(const pb::Probe& probe) {
  const std::string& id = probe.id();
  const bool hex = id.size() == 33 && id[0] == 'p' &&
                   id.find_first_not_of("0123456789abcdef", 1) == std::string::npos;
  if (!hex) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe.id '", id.substr(0, 64),
                     "' is not 'p' and 32 hex digits (a worker older than this server?)"));
  }
  if (probe.description().size() > kMaxProbeDescriptionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("probe.description has ",
                                                   probe.description().size(), " bytes, more than ",
                                                   kMaxProbeDescriptionBytes));
  }
  if (probe.num_samples() < 1 || probe.num_tokens() < probe.num_samples()) {
    return absl::InvalidArgumentError(absl::StrCat("probe.num_samples ", probe.num_samples(),
                                                   " / num_tokens ", probe.num_tokens(),
                                                   " are not a probe's counts"));
  }
  return absl::OkStatus();
}

// The groups an upload says it computed (empty: all, as a worker before groups sends).
absl::StatusOr<analysis::MetricGroups> UploadedGroups(const pb::StepMetrics& metrics) {
  absl::StatusOr<analysis::MetricGroups> groups =
      analysis::ParseMetricGroups(metrics.metric_groups());
  if (!groups.ok()) return Refuse("metric_groups", std::string(groups.status().message()));
  return *groups;
}

// Σ_s min(len_s, cut): the tokens of `samples` cut to `cut` ids each.
int64_t TokensCutTo(const google::protobuf::RepeatedPtrField<pb::TokenSample>& samples,
                    int64_t cut) {
  int64_t total = 0;
  for (const pb::TokenSample& sample : samples) total += std::min<int64_t>(sample.ids_size(), cut);
  return total;
}

// The id of a token probe as the worker computes it (analysis::ComputeProbeId of the unit's
// samples, each cut to the model's length): the one cut that leaves `num_tokens` tokens (the
// unit's seq_len when it sets one; the shortest such cut otherwise, which cuts nothing more
// than any other); INVALID_ARGUMENT when no cut does.
absl::StatusOr<std::string> TokenProbeId(const pb::UnitProbe& probe, int64_t num_tokens) {
  const auto& samples = probe.tokens().samples();
  int64_t longest = 0;
  for (const pb::TokenSample& sample : samples) {
    longest = std::max<int64_t>(longest, sample.ids_size());
  }
  int64_t cut = probe.seq_len() > 0 ? probe.seq_len() : 0;
  if (cut == 0) {
    int64_t low = 1;
    int64_t high = std::max<int64_t>(longest, 1);
    while (low < high) {  // the smallest cut leaving at least num_tokens tokens
      const int64_t mid = low + (high - low) / 2;
      if (TokensCutTo(samples, mid) >= num_tokens) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    cut = low;
  }
  if (TokensCutTo(samples, cut) != num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe.num_tokens ", num_tokens, " is not the unit's token probe (", samples.size(),
        " samples of up to ", longest, " ids) cut to any one length",
        probe.seq_len() > 0 ? absl::StrCat(" (its seq_len is ", probe.seq_len(), ")") : ""));
  }
  std::vector<std::vector<int64_t>> cut_samples;
  cut_samples.reserve(samples.size());
  for (const pb::TokenSample& sample : samples) {
    const int64_t keep = std::min<int64_t>(sample.ids_size(), cut);
    cut_samples.emplace_back(sample.ids().begin(), sample.ids().begin() + keep);
  }
  return analysis::ComputeProbeId(cut_samples);
}

}  // namespace

absl::Status CheckUploadMatchesUnit(const pb::CompleteWorkRequest& upload,
                                    const pb::UnitProbe& probe,
                                    const std::string& reported_probe_id) {
  const pb::Probe& uploaded = upload.probe();
  if (!reported_probe_id.empty() && uploaded.id() != reported_probe_id) {
    return absl::InvalidArgumentError(absl::StrCat("probe.id '", uploaded.id().substr(0, 64),
                                                   "' is not the probe id '", reported_probe_id,
                                                   "' this lease's heartbeat reported"));
  }
  if (probe.has_tokens()) {
    if (uploaded.num_samples() != probe.tokens().samples_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe.num_samples ", uploaded.num_samples(), " is not the unit's ",
                       probe.tokens().samples_size(), " token samples"));
    }
    ASSIGN_OR_RETURN(const std::string id, TokenProbeId(probe, uploaded.num_tokens()));
    if (uploaded.id() != id) {
      return absl::InvalidArgumentError(absl::StrCat("probe.id '", uploaded.id().substr(0, 64),
                                                     "' is not the id of the unit's token probe"));
    }
  } else if (probe.samples() > 0 && uploaded.num_samples() > probe.samples()) {
    return absl::InvalidArgumentError(absl::StrCat("probe.num_samples ", uploaded.num_samples(),
                                                   " is more than the unit's ", probe.samples()));
  }
  ASSIGN_OR_RETURN(const analysis::MetricGroups uploaded_groups, UploadedGroups(upload.metrics()));
  absl::StatusOr<analysis::MetricGroups> unit_groups = analysis::ParseMetricGroups(probe.metrics());
  if (unit_groups.ok() && (*unit_groups & ~uploaded_groups) != 0) {
    return Refuse("metric_groups", absl::StrCat("'", analysis::MetricGroupsText(uploaded_groups),
                                                "' lacks some of the unit's '",
                                                analysis::MetricGroupsText(*unit_groups), "'"));
  }
  if (upload.metrics().token_samples() > probe.token_samples()) {
    return Refuse("token_samples",
                  absl::StrCat(upload.metrics().token_samples(), " is more than the unit's ",
                               probe.token_samples()));
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::StepResult> StepResultFromUpload(const pb::CompleteWorkRequest& upload,
                                                         const std::string& run, int64_t step,
                                                         const std::string& checkpoint_path) {
  const pb::StepMetrics& metrics = upload.metrics();
  RETURN_IF_ERROR(CheckShape(metrics));
  RETURN_IF_ERROR(CheckProbe(upload.probe()));
  if (upload.checkpoint_bytes() < 0 || !(upload.seconds() >= 0) ||
      !std::isfinite(upload.seconds())) {
    return absl::InvalidArgumentError(
        "checkpoint_bytes and seconds must be finite and not negative");
  }
  RETURN_IF_ERROR(CheckAllValues(metrics));
  RETURN_IF_ERROR(CheckFingerprint(upload.fingerprint()));
  ASSIGN_OR_RETURN(const analysis::MetricGroups groups, UploadedGroups(metrics));
  // The names of `all` in the groups computed: the others are absent.
  const auto in_groups = [groups](const std::vector<std::string>& all) {
    std::vector<std::string> names;
    for (const std::string& name : all) {
      if (analysis::Has(groups, analysis::MetricGroupOf(name))) names.push_back(name);
    }
    return names;
  };
  storage::StepResult result;
  result.run = run;
  result.step = step;
  result.checkpoint_path = checkpoint_path;
  result.checkpoint_bytes = upload.checkpoint_bytes();
  result.seconds = upload.seconds();
  result.fingerprint = upload.fingerprint();
  result.probe = {upload.probe().id(), upload.probe().description(), upload.probe().num_samples(),
                  upload.probe().num_tokens()};
  result.model_family = metrics.model_family();
  result.num_layers = metrics.num_layers();
  result.num_heads = metrics.num_heads();
  result.head_dim = metrics.head_dim();

  const int layers = metrics.num_layers();
  const int heads = metrics.num_heads();
  const size_t head_dim = metrics.head_dim();
  const size_t per_head = static_cast<size_t>(layers) * heads;
  RETURN_IF_ERROR(CheckBlocks(
      metrics.per_head(), "per_head", in_groups(analysis::PerHeadMetricNames()), {}, per_head,
      [&](const std::string& name, const auto& values) {
        for (size_t i = 0; i < per_head; ++i) {
          result.scalars.push_back({name, static_cast<int>(i / heads), static_cast<int>(i % heads),
                                    values[static_cast<int>(i)]});
        }
      }));
  RETURN_IF_ERROR(CheckBlocks(metrics.per_hidden_state(), "per_hidden_state",
                              in_groups(analysis::PerHiddenStateMetricNames()), {},
                              static_cast<size_t>(layers) + 1,
                              [&](const std::string& name, const auto& values) {
                                for (int i = 0; i <= layers; ++i)
                                  result.scalars.push_back({name, i, -1, values[i]});
                              }));
  RETURN_IF_ERROR(CheckBlocks(metrics.per_checkpoint(), "per_checkpoint",
                              in_groups(analysis::PerCheckpointMetricNames()), {}, 1,
                              [&](const std::string& name, const auto& values) {
                                result.scalars.push_back({name, -1, -1, values[0]});
                              }));

  // Vectors: `units` of `dim` values each, the i-th stored at layer_of(i), head_of(i).
  auto store_vectors = [&](size_t units, size_t dim, auto layer_of, auto head_of) {
    return [&result, units, dim, layer_of, head_of](const std::string& kind, const auto& values) {
      for (size_t i = 0; i < units; ++i) {
        storage::VectorValue& vector = result.vectors.emplace_back();
        vector.kind = kind;
        vector.layer = layer_of(i);
        vector.head = head_of(i);
        vector.values.assign(values.begin() + i * dim, values.begin() + (i + 1) * dim);
      }
    };
  };
  const auto head_layer = [heads](size_t i) { return static_cast<int>(i / heads); };
  const auto head_head = [heads](size_t i) { return static_cast<int>(i % heads); };
  const std::vector<std::string>& kinds = analysis::PerHeadVectorKinds();
  const std::vector<std::string>& sample_kinds = analysis::TokenSampleKinds();
  const std::vector<std::string> required(kinds.begin(), kinds.begin() + 2);  // q_mean, k_mean
  const std::vector<std::string> optional(kinds.begin() + 2,                  // pre-rotary
                                          kinds.end() - sample_kinds.size());
  RETURN_IF_ERROR(CheckBlocks(metrics.vectors(), "vectors", required, optional, per_head * head_dim,
                              store_vectors(per_head, head_dim, head_layer, head_head)));
  const int pre_rotary = metrics.vectors_size() - 2;
  if (pre_rotary != 0 && pre_rotary != static_cast<int>(optional.size())) {
    return Refuse("vectors",
                  absl::StrCat("give both of ", absl::StrJoin(optional, ", "), " or neither"));
  }

  const int64_t tokens = upload.probe().num_tokens();
  if (metrics.token_samples() < 0 || metrics.token_samples() > tokens) {
    return Refuse("token_samples", absl::StrCat(metrics.token_samples(), " is outside 0..", tokens,
                                                " (the probe's tokens)"));
  }
  const size_t sample_dim = static_cast<size_t>(metrics.token_samples()) * head_dim;
  RETURN_IF_ERROR(CheckBlocks(
      metrics.samples(), "samples",
      metrics.token_samples() > 0 ? sample_kinds : std::vector<std::string>(), {},
      per_head * sample_dim, store_vectors(per_head, sample_dim, head_layer, head_head)));

  const size_t hidden_size = metrics.hidden_size();
  const size_t spectrum = std::min<size_t>(hidden_size, static_cast<size_t>(tokens));
  RETURN_IF_ERROR(
      CheckBlocks(metrics.hidden_state_vectors(), "hidden_state_vectors",
                  in_groups(analysis::PerHiddenStateVectorKinds()), {},
                  (static_cast<size_t>(layers) + 1) * spectrum,
                  store_vectors(
                      static_cast<size_t>(layers) + 1, spectrum,
                      [](size_t i) { return static_cast<int>(i); }, [](size_t) { return -1; })));
  RETURN_IF_ERROR(
      CheckBlocks(metrics.checkpoint_vectors(), "checkpoint_vectors",
                  in_groups(analysis::PerCheckpointVectorKinds()), {}, hidden_size,
                  store_vectors(
                      1, hidden_size, [](size_t) { return -1; }, [](size_t) { return -1; })));
  return result;
}

}  // namespace anisoscope::server
