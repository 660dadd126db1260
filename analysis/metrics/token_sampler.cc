#include "analysis/metrics/token_sampler.h"

#include <algorithm>
#include <numeric>

namespace anisoscope::analysis {

TokenSampler::TokenSampler(const std::vector<int64_t>& sample_lengths, int64_t requested)
    : kept_(sample_lengths.size()) {
  const int64_t total = std::accumulate(sample_lengths.begin(), sample_lengths.end(), int64_t{0});
  count_ = std::clamp<int64_t>(requested, 0, total);
  size_t sample = 0;
  int64_t sample_start = 0;  // global index of the sample's first position
  for (int64_t j = 0; j < count_; ++j) {
    const int64_t t = j * total / count_;
    while (t >= sample_start + sample_lengths[sample]) sample_start += sample_lengths[sample++];
    kept_[sample].push_back({t - sample_start, j});
  }
}

TokenSampler::Selection TokenSampler::Select(const std::vector<size_t>& samples, int64_t length,
                                             const at::Device& device) const {
  std::vector<int64_t> source, target;
  for (size_t b = 0; b < samples.size(); ++b) {
    for (const Kept& kept : kept_[samples[b]]) {
      source.push_back(static_cast<int64_t>(b) * length + kept.position);
      target.push_back(kept.j);
    }
  }
  Selection selection;
  if (source.empty()) return selection;
  const at::TensorOptions options = at::TensorOptions().dtype(at::kLong);
  selection.source = at::tensor(source, options).to(device);
  selection.target = at::tensor(target, options).to(device);
  return selection;
}

}  // namespace anisoscope::analysis
