// The engine against the independent float64 reference (tests/reference) on checkpoints of
// a real (tiny) training run, in both file formats, with padding in the probe.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/extractor/extractor.h"
#include "tests/analysis/extractor/reference_comparison.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

fs::path FixtureDir() { return FixturePath("bert_run"); }

// Extracts `checkpoint` (relative to the fixture) with the fixture probe.
CheckpointMetrics ExtractFixture(const std::string& checkpoint,
                                 const TorchExtractorOptions& options = TestOptions(5)) {
  return ExtractCheckpoint(FixtureDir() / checkpoint, FixtureDir() / "probe.jsonl", options);
}

class ExtractorReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExtractorReferenceTest, MatchesFloat64ReferenceAtEveryStep) {
  ASSERT_TRUE(fs::exists(FixtureDir() / "probe.jsonl")) << "fixture missing at " << FixtureDir();
  Deviations deviations;
  for (const std::string step : {"0", "100", "250", "400"}) {
    ExpectMatchesReference(ExtractFixture(GetParam() + "/step_" + step),
                           ReadJson(FixtureDir() / "reference" / ("step_" + step + ".json")),
                           GetParam() + " step " + step, deviations);
  }
  std::printf(
      "%s: largest deviation from the reference: %.2e absolute (cosines, entropies, "
      "anisotropies), %.2e relative (norms, dots)\n",
      GetParam().c_str(), deviations.absolute, deviations.relative);
}

TEST(ExtractorVariantsTest, UnprefixedNamesWithGammaBetaMatchTheReference) {
  Deviations deviations;
  ExpectMatchesReference(ExtractFixture("legacy/step_400"),
                         ReadJson(FixtureDir() / "reference" / "step_400.json"), "legacy step 400",
                         deviations);
}

TEST(ExtractorVariantsTest, Float16WeightsComputedInFloat32MatchTheirReference) {
  Deviations deviations;
  ExpectMatchesReference(ExtractFixture("fp16/step_400"),
                         ReadJson(FixtureDir() / "reference" / "fp16_step_400.json"),
                         "fp16 step 400", deviations);
}

// The comparison above means something only if training moved attention away from uniform.
TEST(ExtractorReferenceFixtureTest, FixtureHasRealTrainingDynamics) {
  auto mean_entropy = [](const nlohmann::json& reference) {
    double sum = 0;
    for (const nlohmann::json& head : reference["heads"]) sum += head["attn_entropy"].get<double>();
    return sum / static_cast<double>(reference["heads"].size());
  };
  const double first = mean_entropy(ReadJson(FixtureDir() / "reference" / "step_0.json"));
  const double last = mean_entropy(ReadJson(FixtureDir() / "reference" / "step_400.json"));
  EXPECT_LT(last, first - 0.2) << "attention entropy barely fell during fixture training";
}

INSTANTIATE_TEST_SUITE_P(Formats, ExtractorReferenceTest, ::testing::Values("bin", "safetensors"));

TEST(ExtractorBatchingTest, BatchSizeDoesNotChangeResults) {
  const CheckpointMetrics a = ExtractFixture("bin/step_400", TestOptions(1));
  for (int batch_size : {0, 64}) {  // automatic, and everything in one batch
    const CheckpointMetrics b = ExtractFixture("bin/step_400", TestOptions(batch_size));
    ASSERT_EQ(a.heads.size(), b.heads.size());
    for (size_t i = 0; i < a.heads.size(); ++i) {
      EXPECT_NEAR(a.heads[i].attn_entropy, b.heads[i].attn_entropy, 1e-6) << batch_size;
      EXPECT_NEAR(a.heads[i].q_anisotropy, b.heads[i].q_anisotropy, 1e-6) << batch_size;
      EXPECT_NEAR(a.heads[i].qk_mean_dot, b.heads[i].qk_mean_dot,
                  1e-5 * std::abs(b.heads[i].qk_mean_dot) + 1e-9)
          << batch_size;
    }
  }
}

TEST(ExtractorProgressTest, ReportsEveryBatchAndTheFingerprintAndHonoursCancel) {
  const fs::path checkpoint = FixtureDir() / "bin" / "step_0";
  ProbeSpec spec;
  spec.file = FixtureDir() / "probe.jsonl";
  auto extractor = CreateTorchExtractor(TestOptions(4));
  ASSERT_TRUE(extractor.ok());
  auto probe = (*extractor)->BuildProbe(checkpoint, spec, FileGate::Host());
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::vector<std::pair<int, int>> seen;
  ExtractCallbacks progress;
  progress.progress = [&](int done, int total) { seen.push_back({done, total}); };
  auto metrics = (*extractor)->Extract(checkpoint, *probe, progress, FileGate::Host());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const int total = static_cast<int>((probe->samples.size() + 3) / 4);
  ASSERT_EQ(seen.size(), static_cast<size_t>(total));
  EXPECT_EQ(seen.back(), std::make_pair(total, total));

  // Polled once the weights are hashed, then before each batch.
  int polls = 0;
  int batches = 0;
  ExtractCallbacks cancel_after_one_batch;
  cancel_after_one_batch.cancelled = [&] { return ++polls > 2; };
  cancel_after_one_batch.progress = [&](int, int) { ++batches; };
  auto cancelled =
      (*extractor)->Extract(checkpoint, *probe, cancel_after_one_batch, FileGate::Host());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(batches, 1);

  // The fingerprint comes before the model is built and any batch runs; a caller that
  // cancels on it (dedupe) stops the extract there.
  std::string reported;
  ExtractCallbacks cancel_once_hashed;
  cancel_once_hashed.fingerprinted = [&](const std::string& fingerprint) {
    reported = fingerprint;
  };
  cancel_once_hashed.cancelled = [&] { return !reported.empty(); };
  cancel_once_hashed.progress = [&](int, int) { ADD_FAILURE() << "a batch ran"; };
  auto skipped = (*extractor)->Extract(checkpoint, *probe, cancel_once_hashed, FileGate::Host());
  EXPECT_EQ(skipped.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(reported, metrics->fingerprint);
  EXPECT_FALSE(reported.empty());
}

}  // namespace
}  // namespace anisoscope::analysis
