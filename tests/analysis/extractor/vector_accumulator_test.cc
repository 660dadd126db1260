#include "analysis/metrics/vector_accumulator.h"

#include <gtest/gtest.h>

namespace anisoscope::analysis {
namespace {

TEST(VectorAccumulatorTest, MeanAndAnisotropyIgnorePaddedPositions) {
  // One group, two samples of length 3; the second sample's last position is padding.
  at::Tensor x = at::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 1.0,      // sample 0
                             -1.0, 0.0, 2.0, 0.0, 99.0, 99.0},  // sample 1 (last is padding)
                            at::kFloat)
                     .view({2, 1, 3, 2});
  at::Tensor valid = at::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 0.0}, at::kDouble).view({2, 3});
  VectorAccumulator accumulator(1, 2, at::kCPU);
  accumulator.Add(x, valid, 5);
  // Valid vectors: (1,0) (0,1) (1,1) (-1,0) (2,0).
  const at::Tensor mean = accumulator.Mean();
  EXPECT_DOUBLE_EQ(mean[0][0].item<double>(), 3.0 / 5);
  EXPECT_DOUBLE_EQ(mean[0][1].item<double>(), 2.0 / 5);
  // Pairwise cosines over the 10 unordered pairs, by hand.
  const double r = 1 / std::sqrt(2.0);
  const double pairs = 0 + r + -1 + 1 + r + 0 + 0 + -r + r + -1;
  EXPECT_NEAR(accumulator.Anisotropy()[0].item<double>(), pairs / 10, 1e-12);
}

TEST(VectorAccumulatorTest, StreamingEqualsOneShot) {
  at::Tensor x = at::randn({4, 3, 5, 8});
  at::Tensor valid = at::ones({4, 5}, at::kDouble);
  VectorAccumulator whole(3, 8, at::kCPU);
  whole.Add(x, valid, 20);
  VectorAccumulator parts(3, 8, at::kCPU);
  parts.Add(x.narrow(0, 0, 1), valid.narrow(0, 0, 1), 5);
  parts.Add(x.narrow(0, 1, 3), valid.narrow(0, 1, 3), 15);
  EXPECT_TRUE(at::allclose(whole.Mean(), parts.Mean(), 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(whole.Anisotropy(), parts.Anisotropy(), 1e-12, 1e-12));
}

TEST(VectorAccumulatorTest, MeansOnlyKeepsTheSameMean) {
  at::Tensor x = at::randn({2, 3, 5, 8});
  at::Tensor valid = at::ones({2, 5}, at::kDouble);
  valid[1][4] = 0.0;
  VectorAccumulator full(3, 8, at::kCPU);
  full.Add(x, valid, 9);
  VectorAccumulator means_only(3, 8, at::kCPU, /*with_anisotropy=*/false);
  means_only.Add(x, valid, 9);
  EXPECT_TRUE(at::equal(full.Mean(), means_only.Mean()));
  EXPECT_EQ(means_only.count(), 9);
}

TEST(VectorAccumulatorTest, FewerThanTwoVectorsGiveZeroAnisotropy) {
  VectorAccumulator accumulator(2, 4, at::kCPU);
  accumulator.Add(at::ones({1, 2, 1, 4}), at::ones({1, 1}, at::kDouble), 1);
  EXPECT_EQ(accumulator.Anisotropy()[0].item<double>(), 0.0);
}

}  // namespace
}  // namespace anisoscope::analysis
