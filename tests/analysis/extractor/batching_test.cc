#include "analysis/extractor/batching.h"

#include <gtest/gtest.h>

#include <set>

#include "analysis/extractor/device_memory.h"

namespace anisoscope::analysis {
namespace {

ModelShape BertBase() {
  ModelShape shape;
  shape.num_layers = 12;
  shape.num_heads = 12;
  shape.head_dim = 64;
  shape.hidden_size = 768;
  return shape;
}

TEST(BatchingTest, AutoBatchKeepsTheLargestLayerTensorWithin32MiB) {
  // 128 tokens: the feed-forward [B, 128, 3072] dominates; 512: attention [B, 12, 512, 512].
  EXPECT_EQ(AutoBatchSize(BertBase(), 128), 21);
  EXPECT_EQ(AutoBatchSize(BertBase(), 512), 2);
  EXPECT_EQ(AutoBatchSize(BertBase(), 4096), 1);
  EXPECT_EQ(AutoBatchSize(BertBase(), 1), 256);
}

ModelShape Llama7B() {
  ModelShape shape;
  shape.num_layers = 32;
  shape.num_heads = 32;
  shape.head_dim = 128;
  shape.hidden_size = 4096;
  return shape;
}

TEST(BatchingTest, CpuBudgetIsA32ndOfTheCheckpointWithin4To256MiB) {
  const at::Device cpu("cpu");
  constexpr uint64_t kBertBaseBytes = uint64_t{415} << 20;
  EXPECT_EQ(BatchBudgetBytes(cpu, kBertBaseBytes), int64_t{415} << 15);
  EXPECT_EQ(BatchBudgetBytes(cpu, 1 << 20), int64_t{4} << 20);
  EXPECT_EQ(BatchBudgetBytes(cpu, uint64_t{2} << 30), int64_t{64} << 20);
  EXPECT_EQ(BatchBudgetBytes(cpu, uint64_t{64} << 30), int64_t{256} << 20);
  // BERT-base at 128 tokens: 8 samples per forward (of the paper's 16: two forwards).
  EXPECT_EQ(AutoBatchSize(BertBase(), 128, BatchBudgetBytes(cpu, kBertBaseBytes)), 8);
}

TEST(BatchingTest, ALargeModelsBatchesGrowWithItsCheckpoint) {
  // LLaMA-7B in bfloat16 (12.55 GiB): every weight is read and widened once per batch, so
  // 16 x 128 tokens go in one forward (at most 32 samples of 8 MiB each), not four.
  const at::Device cpu("cpu");
  constexpr uint64_t kLlama7BBytes = uint64_t{12852} << 20;
  EXPECT_EQ(AutoBatchSize(Llama7B(), 128, BatchBudgetBytes(cpu, kLlama7BBytes)), 32);
  EXPECT_EQ(AutoBatchSize(Llama7B(), 128), 4);
  // At 2048 tokens one sample's attention alone is 512 MiB: one per batch, whatever the size.
  EXPECT_EQ(AutoBatchSize(Llama7B(), 2048, BatchBudgetBytes(cpu, kLlama7BBytes)), 1);
}

TEST(BatchingTest, AGpuBudgetTakesWholeProbes) {
  // The CUDA ceiling (2 GiB): 170 samples of 512 tokens, so the paper's 128 in one forward.
  EXPECT_EQ(AutoBatchSize(BertBase(), 512, int64_t{2} << 30), 170);
}

TEST(DeviceMemoryTest, TheCpuReportsAvailableMemoryAndNoAllocatorPeak) {
  EXPECT_GT(FreeMemoryBytes(at::Device("cpu")), 0);
  EXPECT_EQ(PeakAllocatedBytes(at::Device("cpu")), 0);
  ResetPeakMemory(at::Device("cpu"));  // a no-op, never a throw
  if (!BuiltWithCuda()) {
    EXPECT_EQ(FreeMemoryBytes(at::Device("cuda")), 0);
  }
}

TEST(BatchingTest, PlanCoversEverySampleOnceLongestFirst) {
  Probe probe;
  for (int n : {3, 9, 5, 9, 1, 7, 2}) probe.samples.push_back(std::vector<int64_t>(n, 1));
  const std::vector<Batch> batches = PlanBatches(probe, BertBase(), 3);
  ASSERT_EQ(batches.size(), 3u);
  std::set<size_t> seen;
  int64_t previous = 1 << 30;
  for (const Batch& batch : batches) {
    EXPECT_LE(batch.samples.size(), 3u);
    for (size_t index : batch.samples) {
      EXPECT_TRUE(seen.insert(index).second) << "sample " << index << " twice";
      const int64_t length = static_cast<int64_t>(probe.samples[index].size());
      EXPECT_LE(length, previous);
      EXPECT_LE(length, batch.length);
      previous = length;
    }
  }
  EXPECT_EQ(seen.size(), probe.samples.size());
  EXPECT_EQ(batches[0].length, 9);
}

TEST(BatchingTest, BatchTensorsMarkPaddingInvalid) {
  Probe probe;
  probe.samples = {{5, 6, 7}, {8}};
  const std::vector<Batch> batches = PlanBatches(probe, BertBase(), 0);
  ASSERT_EQ(batches.size(), 1u);
  const BatchTensors tensors = MakeBatchTensors(probe, batches[0], at::kCPU);
  EXPECT_EQ(tensors.valid_count, 4);
  EXPECT_TRUE(at::equal(tensors.ids, at::tensor({5, 6, 7, 8, 0, 0}, at::kLong).view({2, 3})));
  EXPECT_TRUE(at::equal(tensors.valid,
                        at::tensor({1, 1, 1, 1, 0, 0}).to(at::kBool).view({2, 3})));
}

}  // namespace
}  // namespace anisoscope::analysis
