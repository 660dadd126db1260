// The check of a worker's upload (server/jobs/step_upload.h): a CompleteWorkRequest as it comes
// off the wire, alone and merged into a valid upload (so that the input lies about a real
// upload's shape, blocks and values: repeated blocks are appended, scalars overwritten),
// is refused with an error or accepted whole, consistent with the shape it declares and
// with no value non-finite where METRICS.md defines a number.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "fuzz/amplification_guard.h"
#include "fuzz/fuzz_input.h"
#include "server/jobs/step_upload.h"
#include "worker/metrics_upload.h"

namespace {

namespace pb = ::anisoscope::v1;

// A valid upload of a 2-layer x 2-head model (head_dim 4, hidden size 8, 2 token samples).
const pb::CompleteWorkRequest& ValidUpload() {
  static const pb::CompleteWorkRequest* const upload = [] {
    anisoscope::analysis::CheckpointMetrics metrics;
    metrics.shape.family = "bert";
    metrics.shape.num_layers = 2;
    metrics.shape.num_heads = 2;
    metrics.shape.head_dim = 4;
    metrics.shape.hidden_size = 8;
    metrics.num_samples = 3;
    metrics.num_tokens = 21;
    metrics.token_samples = 2;
    for (int layer = 0; layer < 2; ++layer) {
      for (int head = 0; head < 2; ++head) {
        anisoscope::analysis::HeadMetrics& m = metrics.heads.emplace_back();
        m.layer = layer;
        m.head = head;
        m.q_mean.assign(4, 0.5 + layer);
        m.k_mean.assign(4, -0.5 - head);
        m.q_sample.assign(8, 0.25);
        m.k_sample.assign(8, -0.25);
      }
    }
    for (int index = 0; index <= 2; ++index) {
      anisoscope::analysis::HiddenStateMetrics& m = metrics.hidden_states.emplace_back();
      m.index = index;
      m.spectrum.assign(8, 1.0 / (index + 1));
    }
    metrics.final_norm_gain.assign(8, 1.0);
    auto* valid = new pb::CompleteWorkRequest();
    valid->set_lease_id("lease");
    valid->mutable_probe()->set_id("p0123456789abcdef0123456789abcdef");
    valid->mutable_probe()->set_num_samples(3);
    valid->mutable_probe()->set_num_tokens(21);
    *valid->mutable_metrics() = anisoscope::worker::ToUpload(metrics);
    return valid;
  }();
  return *upload;
}

void Check(const pb::CompleteWorkRequest& upload) {
  auto step = anisoscope::server::StepResultFromUpload(upload, "run", 5, "/x/step_5");
  if (!step.ok()) return;
  // Accepted: every value sits inside the shape the upload declared.
  for (const auto& scalar : step->scalars) {
    if (scalar.layer < -1 || scalar.layer > step->num_layers || scalar.head < -1 ||
        scalar.head >= step->num_heads) {
      std::abort();
    }
  }
  for (const auto& vector : step->vectors) {
    if (vector.layer < -1 || vector.layer > step->num_layers || vector.head < -1 ||
        vector.head >= step->num_heads || vector.values.empty()) {
      std::abort();
    }
  }
  // And finite, or NaN only where METRICS.md's definition can be 0/0.
  const auto allowed = [](double value, const std::string& name) {
    return std::isfinite(value) ||
           (std::isnan(value) && anisoscope::analysis::MayBeUndefined(name));
  };
  for (const auto& scalar : step->scalars) {
    if (!allowed(scalar.value, scalar.metric)) std::abort();
  }
  for (const auto& vector : step->vectors) {
    for (const double value : vector.values) {
      if (!allowed(value, vector.kind)) std::abort();
    }
  }
}

}  // namespace

// The base upload must pass the check, or merging into it explores nothing.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  auto step = anisoscope::server::StepResultFromUpload(ValidUpload(), "run", 5, "/x/step_5");
  if (!step.ok()) {
    std::fprintf(stderr, "complete_work_fuzzer: the valid upload is refused: %s\n",
                 std::string(step.status().message()).c_str());
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const anisoscope::fuzz::AmplificationGuard guard("complete_work_fuzzer", size);
  const std::string bytes(anisoscope::fuzz::AsText(data, size));
  pb::CompleteWorkRequest alone;
  if (alone.ParseFromString(bytes)) Check(alone);
  pb::CompleteWorkRequest lying = ValidUpload();
  if (lying.MergeFromString(bytes)) Check(lying);
  return 0;
}
