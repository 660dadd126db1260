// MetricsObserver on causal and rotary models: the pre-rotary vector kinds and the causal
// entropy, checked against float64 sums over the tensors a recording observer saw.
#include "analysis/metrics/metrics_observer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "tests/analysis/models/tiny_checkpoint.h"

namespace anisoscope::analysis {
namespace {

using at::indexing::Slice;

const std::vector<std::vector<int64_t>> kSamples = {{3, 7, 1, 9, 4, 4}, {2, 8, 5}};

CheckpointMetrics Measure(const TransformerModel& model, const Batch2D& batch) {
  c10::InferenceMode guard;
  const std::vector<int64_t> lengths = {6, 3};  // kSamples
  MetricsObserver observer(model.shape(), model.device(), lengths, /*token_samples=*/4);
  observer.BeginBatch(batch.valid, batch.valid.sum().item<int64_t>(), {0, 1});
  model.Forward(batch.ids, batch.valid, observer);
  return observer.Finish();
}

// Mean over valid tokens of x [B, H, T, d] for head h, float64.
std::vector<double> ValidMean(const at::Tensor& x, const at::Tensor& valid, int64_t h) {
  const at::Tensor w = valid.to(at::kDouble).unsqueeze(-1);  // [B, T, 1]
  const at::Tensor mean = (x.to(at::kDouble).select(1, h) * w).sum(at::IntArrayRef{0, 1}) / w.sum();
  return std::vector<double>(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "dim " << i;
}

TEST(MetricsObserverTest, PerHeadVectorKindsIncludeThePreRotaryMeansAndTokenSamples) {
  EXPECT_EQ(PerHeadVectorKinds(),
            (std::vector<std::string>{"q_mean", "k_mean", "q_mean_pre_rotary", "k_mean_pre_rotary",
                                      "q_sample", "k_sample"}));
}

TEST(MetricsObserverTest, RotaryModelRecordsPreRotaryMeansOverValidTokens) {
  const auto model = LoadModel(TinyNeoX());
  ASSERT_NE(model, nullptr);
  const Batch2D batch = MakeBatch(kSamples);
  const RecordingObserver seen = RunForward(*model, batch);
  const CheckpointMetrics metrics = Measure(*model, batch);
  ASSERT_EQ(metrics.heads.size(), 4u);
  for (const HeadMetrics& m : metrics.heads) {
    ExpectNear(m.q_mean_pre_rotary,
               ValidMean(seen.query_pre_rotary.at(m.layer), batch.valid, m.head), 1e-6);
    ExpectNear(m.k_mean_pre_rotary, ValidMean(seen.key_pre_rotary.at(m.layer), batch.valid, m.head),
               1e-6);
    ExpectNear(m.q_mean, ValidMean(seen.query.at(m.layer), batch.valid, m.head), 1e-6);
    // The pass-through dims (4..7 of 8) are the same before and after the rotation.
    for (size_t i = 4; i < 8; ++i) EXPECT_NEAR(m.q_mean[i], m.q_mean_pre_rotary[i], 1e-12);
  }
}

TEST(MetricsObserverTest, NonRotaryModelLeavesPreRotaryMeansEmpty) {
  const auto model = LoadModel(TinyGPT2());
  ASSERT_NE(model, nullptr);
  const CheckpointMetrics metrics = Measure(*model, MakeBatch(kSamples));
  for (const HeadMetrics& m : metrics.heads) {
    EXPECT_EQ(m.q_mean.size(), 8u);
    EXPECT_TRUE(m.q_mean_pre_rotary.empty());
    EXPECT_TRUE(m.k_mean_pre_rotary.empty());
  }
}

TEST(MetricsObserverTest, CausalEntropyAveragesOverValidQueriesOfTheVisibleKeys) {
  const auto model = LoadModel(TinyGPT2());
  ASSERT_NE(model, nullptr);
  const Batch2D batch = MakeBatch(kSamples);
  const RecordingObserver seen = RunForward(*model, batch);
  const CheckpointMetrics metrics = Measure(*model, batch);
  EXPECT_EQ(metrics.num_tokens, 9);
  EXPECT_EQ(metrics.hidden_states.size(), 3u);
  for (const HeadMetrics& m : metrics.heads) {
    const at::Tensor p = seen.probs.at(m.layer).to(at::kDouble).select(1, m.head);  // [B, T, T]
    const at::Tensor terms = at::where(p > 0, -p * p.log(), at::zeros_like(p));
    const at::Tensor rows = terms.sum(-1);      // [B, T]
    EXPECT_EQ(rows[0][0].item<double>(), 0.0);  // the first query sees one key
    const double want = (rows * batch.valid.to(at::kDouble)).sum().item<double>() / 9.0;
    EXPECT_NEAR(m.attn_entropy, want, 1e-6);
  }
}

}  // namespace
}  // namespace anisoscope::analysis
