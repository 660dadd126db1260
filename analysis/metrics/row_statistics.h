// Row statistics the second-wave metrics need (METRICS.md "Second wave"): per attention row
// the max, min, median and first-key probability over the keys that query may see, and per
// hidden vector the median of its absolute components. Medians are numpy's (the mean of the
// two middle values for an even count).
//
// On the CPU one pass per row (a radix selection, float_selection.h, no sort); elsewhere (CUDA) the
// same statistics from sorted tensors. Both return float64 sums on the input's device. Thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace anisoscope::analysis {

// The four attention statistics, in the order of AttentionRowSums' first dimension.
enum AttentionStatistic {
  kMaxProb = 0,
  kMinProb,
  kMedianProb,
  kFirstTokenMass,
  kNumAttentionStats
};

// probs [B, H, T, T] (any float dtype; keys a query may not see are 0); `lengths` [B] the
// valid (unpadded) length of each sample. Query i < lengths[b] of sample b sees keys
// j < lengths[b], and only j <= i when `causal`. Returns [kNumAttentionStats, H] float64:
// each statistic summed over the valid queries.
at::Tensor AttentionRowSums(const at::Tensor& probs, const std::vector<int64_t>& lengths,
                            bool causal);

// hidden [B, T, D]; returns a 0-dim float64 tensor: Σ over valid t of median_i |x_t,i|.
at::Tensor MedianAbsSum(const at::Tensor& hidden, const std::vector<int64_t>& lengths);

// The device-independent tensor implementations, exposed so that tests compare them with
// the CPU kernels on the CPU.
at::Tensor AttentionRowSumsFromTensors(const at::Tensor& probs, const std::vector<int64_t>& lengths,
                                       bool causal);
at::Tensor MedianAbsSumFromTensors(const at::Tensor& hidden, const std::vector<int64_t>& lengths);

}  // namespace anisoscope::analysis
