#include "analysis/metrics/checkpoint_metrics.h"

namespace anisoscope::analysis {

const std::vector<std::string>& PerHeadMetricNames() {
  static const std::vector<std::string> names = {"q_mean_norm",    "k_mean_norm",  "qk_mean_dot",
                                                 "qk_mean_cosine", "attn_entropy", "q_anisotropy",
                                                 "k_anisotropy"};
  return names;
}

const std::vector<std::string>& PerHiddenStateMetricNames() {
  static const std::vector<std::string> names = {"hidden_anisotropy", "hidden_mean_norm"};
  return names;
}

const std::vector<std::string>& VectorKinds() {
  static const std::vector<std::string> kinds = {"q_mean", "k_mean", "q_mean_pre_rotary",
                                                 "k_mean_pre_rotary"};
  return kinds;
}

void ForEachScalar(
    const CheckpointMetrics& metrics,
    const std::function<void(std::string_view name, int layer, int head, double value)>& fn) {
  for (const HeadMetrics& m : metrics.heads) {
    const double values[] = {m.q_mean_norm,  m.k_mean_norm,  m.qk_mean_dot, m.qk_mean_cosine,
                             m.attn_entropy, m.q_anisotropy, m.k_anisotropy};
    for (size_t i = 0; i < PerHeadMetricNames().size(); ++i) {
      fn(PerHeadMetricNames()[i], m.layer, m.head, values[i]);
    }
  }
  for (const HiddenStateMetrics& m : metrics.hidden_states) {
    fn("hidden_anisotropy", m.index, -1, m.anisotropy);
    fn("hidden_mean_norm", m.index, -1, m.mean_norm);
  }
}

void ForEachVector(const CheckpointMetrics& metrics,
                   const std::function<void(std::string_view kind, int layer, int head,
                                            const std::vector<double>& values)>& fn) {
  for (const HeadMetrics& m : metrics.heads) {
    const std::vector<double>* vectors[] = {&m.q_mean, &m.k_mean, &m.q_mean_pre_rotary,
                                            &m.k_mean_pre_rotary};
    for (size_t i = 0; i < VectorKinds().size(); ++i) {
      if (!vectors[i]->empty()) fn(VectorKinds()[i], m.layer, m.head, *vectors[i]);
    }
  }
}

}  // namespace anisoscope::analysis
