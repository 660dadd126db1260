// The CPU row kernels against the tensor implementation used on CUDA, and the token
// sampler's positions against METRICS.md's t_j = ⌊j·N/M⌋.
#include "analysis/metrics/row_statistics.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "analysis/metrics/token_sampler.h"

namespace anisoscope::analysis {
namespace {

// Softmax rows over the keys each query may see; hidden keys exactly 0, as models hand them.
at::Tensor MaskedProbabilities(const std::vector<int64_t>& lengths, int64_t heads, int64_t length,
                               bool causal) {
  at::manual_seed(7);
  const at::Tensor logits =
      at::randn({static_cast<int64_t>(lengths.size()), heads, length, length});
  at::Tensor allowed = at::zeros({static_cast<int64_t>(lengths.size()), 1, 1, length}, at::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) {
    allowed[static_cast<int64_t>(b)].narrow(-1, 0, lengths[b]).fill_(true);
  }
  if (causal) allowed = allowed & at::ones({length, length}, at::kBool).tril();
  return at::softmax(logits.masked_fill(allowed.logical_not(), -1e30), -1)
      .masked_fill(allowed.logical_not(), 0);
}

TEST(RowStatisticsTest, CpuAttentionKernelMatchesTheTensorPath) {
  const std::vector<int64_t> lengths = {7, 4, 6};  // odd and even counts, padding
  for (bool causal : {false, true}) {
    const at::Tensor probs = MaskedProbabilities(lengths, 3, 7, causal);
    const at::Tensor kernel = AttentionRowSums(probs, lengths, causal);
    const at::Tensor tensors = AttentionRowSumsFromTensors(probs, lengths, causal);
    ASSERT_EQ(kernel.sizes(), (std::vector<int64_t>{kNumAttentionStats, 3}));
    EXPECT_TRUE(at::allclose(kernel, tensors, 1e-6, 1e-9)) << kernel << tensors;
  }
}

TEST(RowStatisticsTest, CausalFirstQueryHasOneKeySoEveryStatisticIsOne) {
  const at::Tensor probs = MaskedProbabilities({1}, 2, 1, /*causal=*/true);
  const at::Tensor sums = AttentionRowSums(probs, {1}, true);
  EXPECT_TRUE(at::allclose(sums, at::ones_like(sums))) << sums;
}

TEST(RowStatisticsTest, MedianIsTheMeanOfTheTwoMiddleValuesForAnEvenCount) {
  // |x| = {1, 4, 2, 3} -> numpy.median 2.5; the padded second token is left out.
  const at::Tensor hidden =
      at::tensor({1.0f, -4.0f, 2.0f, -3.0f, 9.0f, 9.0f, 9.0f, 9.0f}).view({1, 2, 4});
  EXPECT_DOUBLE_EQ(MedianAbsSum(hidden, {1}).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(MedianAbsSumFromTensors(hidden, {1}).item<double>(), 2.5);
}

TEST(TokenSamplerTest, KeepsFloorJNOverMPositionsInProbeOrderAcrossBatches) {
  // N = 10 positions over samples of 4, 3, 3; M = 4 -> t = 0, 2, 5, 7.
  const TokenSampler sampler({4, 3, 3}, 4);
  EXPECT_EQ(sampler.count(), 4);
  // A batch holding samples 2 and 1 (length-sorted), padded to 3: t = 5 is sample 1
  // position 1 (row 1), t = 7 is sample 2 position 0 (row 0).
  const TokenSampler::Selection selection = sampler.Select({2, 1}, 3, at::kCPU);
  EXPECT_TRUE(at::equal(selection.source, at::tensor({0, 4}, at::kLong)));
  EXPECT_TRUE(at::equal(selection.target, at::tensor({3, 2}, at::kLong)));
  EXPECT_EQ(TokenSampler({4, 3, 3}, 50).count(), 10);  // M at most N
  EXPECT_TRUE(TokenSampler({4, 3, 3}, 0).Select({0}, 4, at::kCPU).empty());
}

}  // namespace
}  // namespace anisoscope::analysis
