#include "analysis/metrics/metrics_observer.h"

#include <cmath>
#include <limits>

namespace anisoscope::analysis {
namespace {

std::vector<double> ToVector(const at::Tensor& cpu_row) {
  const at::Tensor contiguous = cpu_row.contiguous();
  const double* data = contiguous.data_ptr<double>();
  return std::vector<double>(data, data + contiguous.numel());
}

}  // namespace

MetricsObserver::MetricsObserver(const ModelShape& shape, const at::Device& device)
    : shape_(shape),
      entropy_sum_(at::zeros({shape.num_layers, shape.num_heads},
                             at::TensorOptions().dtype(at::kDouble).device(device))) {
  for (int layer = 0; layer < shape.num_layers; ++layer) {
    queries_.emplace_back(shape.num_heads, shape.head_dim, device);
    keys_.emplace_back(shape.num_heads, shape.head_dim, device);
  }
  for (int index = 0; index <= shape.num_layers; ++index) {
    hidden_.emplace_back(1, shape.hidden_size, device);
  }
}

void MetricsObserver::BeginBatch(const at::Tensor& valid, int64_t valid_count) {
  valid_ = valid.to(at::kDouble);
  valid_count_ = valid_count;
  num_samples_ += valid.size(0);
}

void MetricsObserver::OnHiddenState(int index, const at::Tensor& hidden) {
  hidden_[index].Add(hidden.unsqueeze(1), valid_, valid_count_);
}

void MetricsObserver::OnAttention(int layer, const at::Tensor& query, const at::Tensor& key,
                                  const at::Tensor& probs) {
  queries_[layer].Add(query, valid_, valid_count_);
  keys_[layer].Add(key, valid_, valid_count_);
  // H_i = -Σ_j p_ij ln p_ij (0 ln 0 = 0), summed over valid query positions i. ln p is taken
  // of p clamped to the smallest normal float, so a masked key (p exactly 0) adds 0; one
  // vectorised pass in place (special_entr's scalar kernel was most of the metrics' cost at
  // 512 tokens).
  const at::Tensor p = probs.to(at::kFloat);
  const at::Tensor row_entropy =
      p.clamp_min(std::numeric_limits<float>::min()).log_().mul_(p).sum(-1).neg_();  // [B, H, T]
  entropy_sum_[layer] +=
      (row_entropy.to(at::kDouble) * valid_.unsqueeze(1)).sum(at::IntArrayRef{0, 2});
}

void MetricsObserver::OnPreRotary(int layer, const at::Tensor& query, const at::Tensor& key) {
  if (pre_rotary_queries_.empty()) {
    const at::Device device = entropy_sum_.device();
    for (int l = 0; l < shape_.num_layers; ++l) {
      pre_rotary_queries_.emplace_back(shape_.num_heads, shape_.head_dim, device,
                                       /*with_anisotropy=*/false);
      pre_rotary_keys_.emplace_back(shape_.num_heads, shape_.head_dim, device,
                                    /*with_anisotropy=*/false);
    }
  }
  pre_rotary_queries_[layer].Add(query, valid_, valid_count_);
  pre_rotary_keys_[layer].Add(key, valid_, valid_count_);
}

CheckpointMetrics MetricsObserver::Finish() const {
  CheckpointMetrics metrics;
  metrics.shape = shape_;
  metrics.num_samples = num_samples_;
  metrics.num_tokens = hidden_.empty() ? 0 : hidden_[0].count();
  const double tokens = static_cast<double>(std::max<int64_t>(metrics.num_tokens, 1));
  const at::Tensor entropy = (entropy_sum_ / tokens).cpu();
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    const at::Tensor q_mean = queries_[layer].Mean().cpu();
    const at::Tensor k_mean = keys_[layer].Mean().cpu();
    const at::Tensor q_anisotropy = queries_[layer].Anisotropy().cpu();
    const at::Tensor k_anisotropy = keys_[layer].Anisotropy().cpu();
    const bool rotary = !pre_rotary_queries_.empty();
    const at::Tensor q_mean_pre = rotary ? pre_rotary_queries_[layer].Mean().cpu() : at::Tensor();
    const at::Tensor k_mean_pre = rotary ? pre_rotary_keys_[layer].Mean().cpu() : at::Tensor();
    for (int head = 0; head < shape_.num_heads; ++head) {
      HeadMetrics m;
      m.layer = layer;
      m.head = head;
      m.q_mean = ToVector(q_mean[head]);
      m.k_mean = ToVector(k_mean[head]);
      if (rotary) {
        m.q_mean_pre_rotary = ToVector(q_mean_pre[head]);
        m.k_mean_pre_rotary = ToVector(k_mean_pre[head]);
      }
      double qq = 0, kk = 0, qk = 0;
      for (size_t i = 0; i < m.q_mean.size(); ++i) {
        qq += m.q_mean[i] * m.q_mean[i];
        kk += m.k_mean[i] * m.k_mean[i];
        qk += m.q_mean[i] * m.k_mean[i];
      }
      m.q_mean_norm = std::sqrt(qq);
      m.k_mean_norm = std::sqrt(kk);
      m.qk_mean_dot = qk;
      const double norms = m.q_mean_norm * m.k_mean_norm;
      m.qk_mean_cosine = norms > 0 ? qk / norms : 0.0;
      m.attn_entropy = entropy[layer][head].item<double>();
      m.q_anisotropy = q_anisotropy[head].item<double>();
      m.k_anisotropy = k_anisotropy[head].item<double>();
      metrics.heads.push_back(std::move(m));
    }
  }
  for (int index = 0; index <= shape_.num_layers; ++index) {
    HiddenStateMetrics m;
    m.index = index;
    m.anisotropy = hidden_[index].Anisotropy().cpu()[0].item<double>();
    m.mean_norm = at::linalg_vector_norm(hidden_[index].Mean(), 2).cpu().item<double>();
    metrics.hidden_states.push_back(m);
  }
  return metrics;
}

}  // namespace anisoscope::analysis
