#include "worker/metrics_upload.h"

#include <algorithm>
#include <map>
#include <string>

namespace anisoscope::worker {

namespace pb = ::anisoscope::v1;

pb::StepMetrics ToUpload(const analysis::CheckpointMetrics& metrics) {
  pb::StepMetrics upload;
  upload.set_model_family(metrics.shape.family);
  upload.set_num_layers(metrics.shape.num_layers);
  upload.set_num_heads(metrics.shape.num_heads);
  upload.set_head_dim(metrics.shape.head_dim);
  upload.set_hidden_size(metrics.shape.hidden_size);
  upload.set_token_samples(static_cast<int32_t>(metrics.token_samples));
  if (metrics.groups != analysis::kAllMetricGroups) {
    upload.set_metric_groups(analysis::MetricGroupsText(metrics.groups));
  }
  // Heads come layer-major from the engine, so appending keeps each block layer-major.
  std::map<std::string, pb::ScalarBlock*> scalars;
  analysis::ForEachScalar(metrics, [&](std::string_view name, int layer, int head, double value) {
    pb::ScalarBlock*& block = scalars[std::string(name)];
    if (block == nullptr) {
      block = head >= 0    ? upload.add_per_head()
              : layer >= 0 ? upload.add_per_hidden_state()
                           : upload.add_per_checkpoint();
      block->set_metric(std::string(name));
    }
    block->add_values(value);
  });
  const std::vector<std::string>& samples = analysis::TokenSampleKinds();
  std::map<std::string, pb::VectorBlock*> vectors;
  analysis::ForEachVector(
      metrics, [&](std::string_view kind, int layer, int head, const std::vector<double>& values) {
        pb::VectorBlock*& block = vectors[std::string(kind)];
        if (block == nullptr) {
          const bool sample = std::find(samples.begin(), samples.end(), kind) != samples.end();
          block = sample       ? upload.add_samples()
                  : head >= 0  ? upload.add_vectors()
                  : layer >= 0 ? upload.add_hidden_state_vectors()
                               : upload.add_checkpoint_vectors();
          block->set_kind(std::string(kind));
        }
        block->mutable_values()->Add(values.begin(), values.end());
      });
  return upload;
}

}  // namespace anisoscope::worker
