#include "bench/synthetic_run.h"

#include <cmath>
#include <vector>

namespace anisoscope::bench {
namespace {

constexpr int kHeadDim = 64;
constexpr const char* kHeadMetrics[] = {"q_mean_norm",    "k_mean_norm",  "qk_mean_dot",
                                        "qk_mean_cosine", "attn_entropy", "q_anisotropy",
                                        "k_anisotropy"};

}  // namespace

int64_t SyntheticStep(int index) { return static_cast<int64_t>(index) * 20000; }

absl::Status WriteSyntheticStep(storage::MetricsStore& store, int index) {
  const double s = index;
  storage::StepResult result;
  result.run = kSyntheticRun;
  result.probe = {"p0", "synthetic", 128, 65536};
  result.step = SyntheticStep(index);
  result.model_family = "bert";
  result.num_layers = kSyntheticLayers;
  result.num_heads = kSyntheticHeads;
  result.head_dim = kHeadDim;
  for (int layer = 0; layer < kSyntheticLayers; ++layer) {
    for (int head = 0; head < kSyntheticHeads; ++head) {
      int m = 0;
      for (const char* metric : kHeadMetrics) {
        result.scalars.push_back({metric, layer, head, std::sin(s * 0.3 + layer + head + m++)});
      }
      std::vector<double> q(kHeadDim);
      std::vector<double> k(kHeadDim);
      for (int i = 0; i < kHeadDim; ++i) {
        q[i] = std::cos(s + i * 0.1 + head);
        k[i] = std::sin(s + i * 0.2 + layer);
      }
      result.vectors.push_back({"q_mean", layer, head, q});
      result.vectors.push_back({"k_mean", layer, head, k});
    }
  }
  for (int hidden = 0; hidden <= kSyntheticLayers; ++hidden) {
    result.scalars.push_back({"hidden_anisotropy", hidden, -1, 0.1 * hidden + s * 0.01});
    result.scalars.push_back({"hidden_mean_norm", hidden, -1, 10.0 + hidden + s});
  }
  return store.WriteStep(result, false);
}

}  // namespace anisoscope::bench
