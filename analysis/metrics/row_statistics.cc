#include "analysis/metrics/row_statistics.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "analysis/metrics/float_selection.h"

namespace anisoscope::analysis {
namespace {

at::Tensor LengthsOn(const std::vector<int64_t>& lengths, const at::Device& device) {
  return at::tensor(lengths, at::TensorOptions().dtype(at::kLong)).to(device);
}

// [B, T] bool: position t < lengths[b].
at::Tensor ValidPositions(const std::vector<int64_t>& lengths, int64_t length,
                          const at::Device& device) {
  const at::Tensor positions =
      at::arange(length, at::TensorOptions().dtype(at::kLong).device(device));
  return positions.unsqueeze(0) < LengthsOn(lengths, device).unsqueeze(1);
}

at::Tensor AttentionRowSumsOnCpu(const at::Tensor& probs, const std::vector<int64_t>& lengths,
                                 bool causal) {
  const at::Tensor p = probs.to(at::kFloat).contiguous();
  const int64_t batch = p.size(0), heads = p.size(1), length = p.size(2);
  const float* data = p.data_ptr<float>();
  std::vector<double> sums(static_cast<size_t>(batch * heads * kNumAttentionStats), 0.0);
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    SelectionScratch scratch;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t valid = lengths[static_cast<size_t>(bh / heads)];
      double* out = &sums[static_cast<size_t>(bh * kNumAttentionStats)];
      for (int64_t i = 0; i < valid; ++i) {
        const float* probs_row = data + (bh * length + i) * length;
        const int64_t seen = causal ? std::min(i + 1, valid) : valid;
        const RowSummary row = SummarizeRow(probs_row, seen, scratch);
        out[kMaxProb] += row.max;
        out[kMinProb] += row.min;
        out[kMedianProb] += row.median;
        out[kFirstTokenMass] += probs_row[0];
      }
    }
  });
  at::Tensor result =
      at::zeros({kNumAttentionStats, heads}, at::TensorOptions().dtype(at::kDouble));
  auto accessor = result.accessor<double, 2>();
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    for (int s = 0; s < kNumAttentionStats; ++s) {
      accessor[s][bh % heads] += sums[static_cast<size_t>(bh * kNumAttentionStats + s)];
    }
  }
  return result;
}

at::Tensor MedianAbsSumOnCpu(const at::Tensor& hidden, const std::vector<int64_t>& lengths) {
  const at::Tensor x = hidden.to(at::kFloat).contiguous();
  const int64_t batch = x.size(0), length = x.size(1), dim = x.size(2);
  const float* data = x.data_ptr<float>();
  std::vector<double> medians(static_cast<size_t>(batch * length), 0.0);
  at::parallel_for(0, batch * length, 16, [&](int64_t begin, int64_t end) {
    SelectionScratch scratch;
    for (int64_t bt = begin; bt < end; ++bt) {
      if (bt % length >= lengths[static_cast<size_t>(bt / length)]) continue;
      medians[static_cast<size_t>(bt)] = SummarizeAbsRow(data + bt * dim, dim, scratch).median;
    }
  });
  return at::scalar_tensor(std::accumulate(medians.begin(), medians.end(), 0.0),
                           at::TensorOptions().dtype(at::kDouble));
}

}  // namespace

at::Tensor AttentionRowSumsFromTensors(const at::Tensor& probs, const std::vector<int64_t>& lengths,
                                       bool causal) {
  const at::Tensor p = probs.to(at::kFloat);
  const int64_t length = p.size(-1);
  const at::Device device = p.device();
  const at::Tensor valid = ValidPositions(lengths, length, device);  // [B, T]
  at::Tensor allowed = valid.unsqueeze(1).unsqueeze(1);              // [B, 1, 1, T] keys
  if (causal) {
    allowed = allowed & at::ones({length, length}, valid.options()).tril();
  }
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor hidden_keys = allowed.logical_not();
  // Each visible value twice, each hidden key once as -inf and once as +inf: the two middle
  // entries of the 2T sorted values are the two middle ones of the visible values.
  const at::Tensor doubled =
      at::cat({p.masked_fill(hidden_keys, -inf), p.masked_fill(hidden_keys, inf)}, -1);
  const at::Tensor sorted = std::get<0>(doubled.sort(-1));
  const at::Tensor median =
      (sorted.select(-1, length - 1).to(at::kDouble) + sorted.select(-1, length).to(at::kDouble)) /
      2;
  const at::Tensor stats = at::stack({p.amax(-1).to(at::kDouble),
                                      p.masked_fill(hidden_keys, inf).amin(-1).to(at::kDouble),
                                      median, p.select(-1, 0).to(at::kDouble)});  // [4, B, H, T]
  const at::Tensor query_valid = valid.unsqueeze(1).unsqueeze(0);                 // [1, B, 1, T]
  return stats.masked_fill(query_valid.logical_not(), 0).sum(at::IntArrayRef{1, 3});
}

at::Tensor MedianAbsSumFromTensors(const at::Tensor& hidden, const std::vector<int64_t>& lengths) {
  const int64_t dim = hidden.size(-1);
  const at::Tensor sorted = std::get<0>(hidden.to(at::kFloat).abs().sort(-1));
  const at::Tensor median = (sorted.select(-1, (dim - 1) / 2).to(at::kDouble) +
                             sorted.select(-1, dim / 2).to(at::kDouble)) /
                            2;  // [B, T]
  const at::Tensor valid = ValidPositions(lengths, hidden.size(1), hidden.device());
  return median.masked_fill(valid.logical_not(), 0).sum();
}

at::Tensor AttentionRowSums(const at::Tensor& probs, const std::vector<int64_t>& lengths,
                            bool causal) {
  return probs.device().is_cpu() ? AttentionRowSumsOnCpu(probs, lengths, causal)
                                 : AttentionRowSumsFromTensors(probs, lengths, causal);
}

at::Tensor MedianAbsSum(const at::Tensor& hidden, const std::vector<int64_t>& lengths) {
  return hidden.device().is_cpu() ? MedianAbsSumOnCpu(hidden, lengths)
                                  : MedianAbsSumFromTensors(hidden, lengths);
}

}  // namespace anisoscope::analysis
