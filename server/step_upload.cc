#include "server/step_upload.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/fingerprint.h"
#include "analysis/metrics/checkpoint_metrics.h"
#include "common/status_macros.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

absl::Status Refuse(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("metrics.", field, ": ", why));
}

absl::Status CheckShape(const pb::StepMetrics& metrics) {
  if (metrics.model_family().empty()) return Refuse("model_family", "empty");
  const std::pair<const char*, int> dimensions[] = {{"num_layers", metrics.num_layers()},
                                                    {"num_heads", metrics.num_heads()},
                                                    {"head_dim", metrics.head_dim()}};
  for (const auto& [name, value] : dimensions) {
    if (value < 1 || value > kMaxShapeDimension) {
      return Refuse(name, absl::StrCat(value, " is outside 1..", kMaxShapeDimension));
    }
  }
  return absl::OkStatus();
}

const std::string& BlockName(const pb::ScalarBlock& block) { return block.metric(); }
const std::string& BlockName(const pb::VectorBlock& block) { return block.kind(); }

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
  const bool hex = id.size() == 17 && id[0] == 'p' &&
                   id.find_first_not_of("0123456789abcdef", 1) == std::string::npos;
  if (!hex) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe.id '", id, "' is not 'p' and 16 hex digits"));
  }
  if (probe.num_samples() < 1 || probe.num_tokens() < probe.num_samples()) {
    return absl::InvalidArgumentError(absl::StrCat("probe.num_samples ", probe.num_samples(),
                                                   " / num_tokens ", probe.num_tokens(),
                                                   " are not a probe's counts"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<storage::StepResult> StepResultFromUpload(const pb::CompleteWorkRequest& upload,
                                                         const std::string& run, int64_t step,
                                                         const std::string& checkpoint_path) {
  const pb::StepMetrics& metrics = upload.metrics();
  RETURN_IF_ERROR(CheckShape(metrics));
  RETURN_IF_ERROR(CheckProbe(upload.probe()));
  if (upload.checkpoint_bytes() < 0 || !(upload.seconds() >= 0)) {
    return absl::InvalidArgumentError("checkpoint_bytes and seconds must not be negative");
  }
  RETURN_IF_ERROR(CheckFingerprint(upload.fingerprint()));
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
  RETURN_IF_ERROR(CheckBlocks(metrics.per_head(), "per_head", analysis::PerHeadMetricNames(), {},
                              per_head, [&](const std::string& name, const auto& values) {
                                for (size_t i = 0; i < per_head; ++i) {
                                  result.scalars.push_back({name, static_cast<int>(i / heads),
                                                            static_cast<int>(i % heads),
                                                            values[static_cast<int>(i)]});
                                }
                              }));
  RETURN_IF_ERROR(CheckBlocks(
      metrics.per_hidden_state(), "per_hidden_state", analysis::PerHiddenStateMetricNames(), {},
      static_cast<size_t>(layers) + 1, [&](const std::string& name, const auto& values) {
        for (int i = 0; i <= layers; ++i) result.scalars.push_back({name, i, -1, values[i]});
      }));
  RETURN_IF_ERROR(CheckBlocks(metrics.per_checkpoint(), "per_checkpoint",
                              analysis::PerCheckpointMetricNames(), {}, 1,
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

  if (metrics.hidden_size() < 1 || metrics.hidden_size() > kMaxShapeDimension) {
    return Refuse("hidden_size",
                  absl::StrCat(metrics.hidden_size(), " is outside 1..", kMaxShapeDimension));
  }
  const size_t hidden_size = metrics.hidden_size();
  const size_t spectrum = std::min<size_t>(hidden_size, static_cast<size_t>(tokens));
  RETURN_IF_ERROR(CheckBlocks(
      metrics.hidden_state_vectors(), "hidden_state_vectors", analysis::PerHiddenStateVectorKinds(),
      {}, (static_cast<size_t>(layers) + 1) * spectrum,
      store_vectors(
          static_cast<size_t>(layers) + 1, spectrum, [](size_t i) { return static_cast<int>(i); },
          [](size_t) { return -1; })));
  RETURN_IF_ERROR(
      CheckBlocks(metrics.checkpoint_vectors(), "checkpoint_vectors",
                  analysis::PerCheckpointVectorKinds(), {}, hidden_size,
                  store_vectors(
                      1, hidden_size, [](size_t) { return -1; }, [](size_t) { return -1; })));
  return result;
}

}  // namespace anisoscope::server
