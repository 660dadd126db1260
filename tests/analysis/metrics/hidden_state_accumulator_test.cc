// The streamed spectral statistics against a direct float64 computation on the same
// vectors, for a hidden state whose mean dwarfs its spread (an anisotropic state with a
// massive activation): the moments about a shift keep IsoScore and the spectrum accurate
// although each batch's product is float32.
#include "analysis/metrics/hidden_state_accumulator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "analysis/metrics/spectral_statistics.h"

namespace anisoscope::analysis {
namespace {

TEST(HiddenStateAccumulatorTest, LargeMeanSmallSpreadMatchesFloat64) {
  at::manual_seed(11);
  const int64_t batches = 3, samples = 4, length = 24, dim = 32;
  at::Tensor mean = at::randn({dim}, at::kDouble);
  mean[5] = 3000.0;  // a massive activation
  // Spread differing per direction, so that IsoScore is far from 0 and 1.
  const at::Tensor scale = at::linspace(0.05, 2.0, dim, at::kDouble);
  HiddenStateAccumulator accumulator(dim, at::kCPU);
  std::vector<at::Tensor> all;
  for (int64_t b = 0; b < batches; ++b) {
    const at::Tensor hidden =
        (mean + at::randn({samples, length, dim}, at::kDouble) * scale).to(at::kFloat);
    std::vector<int64_t> lengths = {length, length - 5, length, 7};
    at::Tensor valid = at::zeros({samples, length}, at::kDouble);
    int64_t count = 0;
    for (int64_t s = 0; s < samples; ++s) {
      valid[s].narrow(0, 0, lengths[s]).fill_(1);
      all.push_back(hidden[s].narrow(0, 0, lengths[s]).to(at::kDouble));
      count += lengths[s];
    }
    accumulator.Add(hidden, valid, lengths, count);
  }
  const HiddenStateMetrics streamed = accumulator.Finish(0);

  const at::Tensor x = at::cat(all);  // the valid vectors, float64
  const int64_t n = x.size(0);
  const at::Tensor centered = x - x.mean(0);
  const SpectralStatistics direct = ComputeSpectralStatistics(
      at::mm(centered.t(), centered), at::zeros({dim}, at::kDouble), x.mean(0), n);
  ASSERT_EQ(streamed.spectrum.size(), direct.spectrum.size());
  for (size_t i = 0; i < direct.spectrum.size(); ++i) {
    EXPECT_NEAR(streamed.spectrum[i], direct.spectrum[i], 1e-6) << i;
  }
  EXPECT_NEAR(streamed.isoscore, direct.isoscore, 1e-5);
  EXPECT_GT(direct.isoscore, 0.2);
  EXPECT_LT(direct.isoscore, 0.9);
  EXPECT_NEAR(streamed.ev_1, direct.ev_1, 1e-9);
  EXPECT_NEAR(streamed.mean_norm, at::linalg_vector_norm(x.mean(0), 2).item<double>(), 1e-9);
}

}  // namespace
}  // namespace anisoscope::analysis
