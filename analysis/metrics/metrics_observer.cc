#include "analysis/metrics/metrics_observer.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "analysis/metrics/row_statistics.h"

namespace anisoscope::analysis {
namespace {

std::vector<double> ToVector(const at::Tensor& cpu_row) {
  const at::Tensor contiguous = cpu_row.contiguous();
  const double* data = contiguous.data_ptr<double>();
  return std::vector<double>(data, data + contiguous.numel());
}

}  // namespace

MetricsObserver::MetricsObserver(const ModelShape& shape, const at::Device& device,
                                 const std::vector<int64_t>& sample_lengths, int64_t token_samples,
                                 MetricGroups groups)
    : shape_(shape),
      groups_(groups),
      sample_lengths_(sample_lengths),
      sampler_(sample_lengths, token_samples) {
  const at::TensorOptions doubles = at::TensorOptions().dtype(at::kDouble).device(device);
  entropy_sum_ = at::zeros({shape.num_layers, shape.num_heads}, doubles);
  if (Has(groups_, MetricGroup::kSharpness)) {
    attention_sums_ = at::zeros({shape.num_layers, kNumAttentionStats, shape.num_heads}, doubles);
  }
  for (int layer = 0; layer < shape.num_layers; ++layer) {
    queries_.emplace_back(shape.num_heads, shape.head_dim, device);
    keys_.emplace_back(shape.num_heads, shape.head_dim, device);
    if (sampler_.count() > 0) {
      const at::TensorOptions floats = at::TensorOptions().dtype(at::kFloat).device(device);
      query_samples_.push_back(
          at::zeros({sampler_.count(), shape.num_heads, shape.head_dim}, floats));
      key_samples_.push_back(at::zeros_like(query_samples_.back()));
    }
  }
  for (int index = 0; index <= shape.num_layers; ++index) {
    hidden_.emplace_back(shape.hidden_size, device, groups_);
  }
}

void MetricsObserver::BeginBatch(const at::Tensor& valid, int64_t valid_count,
                                 const std::vector<size_t>& samples) {
  valid_ = valid.to(at::kDouble);
  valid_count_ = valid_count;
  num_samples_ += valid.size(0);
  lengths_.clear();
  for (size_t sample : samples) lengths_.push_back(sample_lengths_[sample]);
  selection_ = sampler_.Select(samples, valid.size(1), valid.device());
}

void MetricsObserver::OnHiddenState(int index, const at::Tensor& hidden) {
  hidden_[index].Add(hidden, valid_, lengths_, valid_count_);
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
  if (Has(groups_, MetricGroup::kSharpness)) {
    attention_sums_[layer] += AttentionRowSums(p, lengths_, shape_.causal);
  }
  if (!selection_.empty()) {
    KeepSamples(query, query_samples_[layer]);
    KeepSamples(key, key_samples_[layer]);
  }
}

void MetricsObserver::KeepSamples(const at::Tensor& vectors, at::Tensor& samples) const {
  const int64_t batch = vectors.size(0), length = vectors.size(2);
  const at::Tensor by_position =
      vectors.permute({0, 2, 1, 3}).reshape({batch * length, shape_.num_heads, shape_.head_dim});
  samples.index_copy_(0, selection_.target,
                      by_position.index_select(0, selection_.source).to(at::kFloat));
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
  metrics.groups = groups_;
  metrics.shape = shape_;
  metrics.num_samples = num_samples_;
  metrics.num_tokens = queries_.empty() ? 0 : queries_[0].count();
  metrics.token_samples = sampler_.count();
  const double tokens = static_cast<double>(std::max<int64_t>(metrics.num_tokens, 1));
  const at::Tensor entropy = (entropy_sum_ / tokens).cpu();
  const bool sharpness = Has(groups_, MetricGroup::kSharpness);
  const at::Tensor attention = sharpness ? (attention_sums_ / tokens).cpu() : at::Tensor();
  for (int layer = 0; layer < shape_.num_layers; ++layer) {
    const at::Tensor q_mean = queries_[layer].Mean().cpu();
    const at::Tensor k_mean = keys_[layer].Mean().cpu();
    const at::Tensor q_anisotropy = queries_[layer].Anisotropy().cpu();
    const at::Tensor k_anisotropy = keys_[layer].Anisotropy().cpu();
    const bool rotary = !pre_rotary_queries_.empty();
    const at::Tensor q_mean_pre = rotary ? pre_rotary_queries_[layer].Mean().cpu() : at::Tensor();
    const at::Tensor k_mean_pre = rotary ? pre_rotary_keys_[layer].Mean().cpu() : at::Tensor();
    const bool sampled = sampler_.count() > 0;
    const at::Tensor q_sample =
        sampled ? query_samples_[layer].to(at::kCPU, at::kDouble) : at::Tensor();
    const at::Tensor k_sample =
        sampled ? key_samples_[layer].to(at::kCPU, at::kDouble) : at::Tensor();
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
      if (sampled) {
        m.q_sample = ToVector(q_sample.select(1, head));
        m.k_sample = ToVector(k_sample.select(1, head));
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
      if (sharpness) {
        m.attn_max_prob = attention[layer][kMaxProb][head].item<double>();
        m.attn_min_prob = attention[layer][kMinProb][head].item<double>();
        m.attn_median_prob = attention[layer][kMedianProb][head].item<double>();
        m.attn_first_token_mass = attention[layer][kFirstTokenMass][head].item<double>();
      }
      metrics.heads.push_back(std::move(m));
    }
  }
  // Two eigen-solves per hidden state: run side by side, each on one core (LAPACK's
  // tridiagonal reduction gains little from a second thread).
  metrics.hidden_states.resize(hidden_.size());
  at::parallel_for(0, static_cast<int64_t>(hidden_.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      metrics.hidden_states[index] = hidden_[index].Finish(static_cast<int>(index));
    }
  });
  return metrics;
}

}  // namespace anisoscope::analysis
