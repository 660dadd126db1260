// TokenSampler: the M fixed probe positions whose Q and K vectors are kept (METRICS.md
// "Token samples"): the N valid positions enumerated in sample order, then position order,
// and t_j = ⌊j·N/M⌋ for j = 0 … M−1 (M at most N). The probe is fixed, so the positions are
// the same at every step. Immutable after construction; thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace anisoscope::analysis {

class TokenSampler {
 public:
  // `sample_lengths`: the probe's samples in probe order; `requested` M (0: none).
  TokenSampler(const std::vector<int64_t>& sample_lengths, int64_t requested);

  // M, the number of positions kept: min(requested, N).
  int64_t count() const { return count_; }

  // For a batch of probe samples `samples` (batch row b is probe sample samples[b]) padded
  // to `length`: the flat indices b·length + position of the kept positions in the batch
  // (`source`) and their sample numbers j (`target`), both int64 on `device`.
  struct Selection {
    at::Tensor source;
    at::Tensor target;
    bool empty() const { return !source.defined() || source.numel() == 0; }
  };
  Selection Select(const std::vector<size_t>& samples, int64_t length,
                   const at::Device& device) const;

 private:
  struct Kept {
    int64_t position;  // within its sample
    int64_t j;         // sample number 0 … M−1
  };
  std::vector<std::vector<Kept>> kept_;  // per probe sample
  int64_t count_ = 0;
};

}  // namespace anisoscope::analysis
