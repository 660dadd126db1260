// The engine against the independent float64 reference (tests/reference) on checkpoints of
// a real (tiny) training run, in both file formats, with padding in the probe.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/extractor.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

fs::path FixtureDir() {
  const char* dir = std::getenv("ANISOSCOPE_FIXTURES");
  return fs::path(dir ? dir : "fixtures") / "bert_run";
}

TorchExtractorOptions CpuOptions(int batch_size) {
  TorchExtractorOptions options;
  options.batch_size = batch_size;
  return options;
}

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  return nlohmann::json::parse(in);
}

// Extracts `checkpoint` (relative to the fixture) with the fixture probe.
CheckpointMetrics ExtractFixture(const std::string& checkpoint,
                                 const TorchExtractorOptions& options = CpuOptions(5)) {
  auto extractor = CreateTorchExtractor(options);
  EXPECT_TRUE(extractor.ok()) << extractor.status();
  ProbeSpec spec;
  spec.file = FixtureDir() / "probe.jsonl";
  auto probe = (*extractor)->BuildProbe(FixtureDir() / checkpoint, spec);
  EXPECT_TRUE(probe.ok()) << probe.status();
  auto metrics = (*extractor)->Extract(FixtureDir() / checkpoint, *probe, {});
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *metrics : CheckpointMetrics();
}

// The largest deviations seen, printed once per format for the README's figures.
struct Deviations {
  double absolute = 0;  // cosines, entropies, anisotropies
  double relative = 0;  // norms, dots
  void Absolute(double a, double b) { absolute = std::max(absolute, std::abs(a - b)); }
  void Relative(double value) { relative = std::max(relative, value); }
};

// Cosines, entropies, anisotropies: absolute 2e-4. Norms, dots: relative 1e-3.
void ExpectMatchesReference(const CheckpointMetrics& got, const nlohmann::json& want,
                            const std::string& where, Deviations& deviations) {
  ASSERT_EQ(got.num_tokens, want["num_tokens"].get<int64_t>()) << where;
  ASSERT_EQ(got.heads.size(), want["heads"].size()) << where;
  auto relative = [](double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-3); };
  for (size_t i = 0; i < got.heads.size(); ++i) {
    const HeadMetrics& g = got.heads[i];
    const nlohmann::json& w = want["heads"][i];
    const std::string at =
        where + " layer " + std::to_string(g.layer) + " head " + std::to_string(g.head);
    ASSERT_EQ(g.layer, w["layer"].get<int>()) << at;
    ASSERT_EQ(g.head, w["head"].get<int>()) << at;
    deviations.Absolute(g.qk_mean_cosine, w["qk_mean_cosine"].get<double>());
    deviations.Absolute(g.attn_entropy, w["attn_entropy"].get<double>());
    deviations.Absolute(g.q_anisotropy, w["q_anisotropy"].get<double>());
    deviations.Absolute(g.k_anisotropy, w["k_anisotropy"].get<double>());
    deviations.Relative(relative(g.q_mean_norm, w["q_mean_norm"].get<double>()));
    deviations.Relative(relative(g.k_mean_norm, w["k_mean_norm"].get<double>()));
    deviations.Relative(relative(g.qk_mean_dot, w["qk_mean_dot"].get<double>()));
    EXPECT_NEAR(g.qk_mean_cosine, w["qk_mean_cosine"].get<double>(), 2e-4) << at;
    EXPECT_NEAR(g.attn_entropy, w["attn_entropy"].get<double>(), 2e-4) << at;
    EXPECT_NEAR(g.q_anisotropy, w["q_anisotropy"].get<double>(), 2e-4) << at;
    EXPECT_NEAR(g.k_anisotropy, w["k_anisotropy"].get<double>(), 2e-4) << at;
    EXPECT_LT(relative(g.q_mean_norm, w["q_mean_norm"].get<double>()), 1e-3) << at;
    EXPECT_LT(relative(g.k_mean_norm, w["k_mean_norm"].get<double>()), 1e-3) << at;
    EXPECT_LT(relative(g.qk_mean_dot, w["qk_mean_dot"].get<double>()), 1e-3) << at;
    const auto q_mean = w["q_mean"].get<std::vector<double>>();
    ASSERT_EQ(g.q_mean.size(), q_mean.size()) << at;
    for (size_t j = 0; j < q_mean.size(); ++j) {
      EXPECT_NEAR(g.q_mean[j], q_mean[j], 1e-3 * g.q_mean_norm) << at << " q_mean[" << j << "]";
    }
  }
  ASSERT_EQ(got.hidden_states.size(), want["hidden_states"].size()) << where;
  for (size_t i = 0; i < got.hidden_states.size(); ++i) {
    const nlohmann::json& w = want["hidden_states"][i];
    const std::string at = where + " hidden state " + std::to_string(i);
    deviations.Absolute(got.hidden_states[i].anisotropy, w["anisotropy"].get<double>());
    deviations.Relative(relative(got.hidden_states[i].mean_norm, w["mean_norm"].get<double>()));
    EXPECT_NEAR(got.hidden_states[i].anisotropy, w["anisotropy"].get<double>(), 2e-4) << at;
    EXPECT_LT(relative(got.hidden_states[i].mean_norm, w["mean_norm"].get<double>()), 1e-3) << at;
  }
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

TEST(ExtractorCudaTest, CudaMatchesTheReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this LibTorch build";
  TorchExtractorOptions options = CpuOptions(5);
  options.device = "cuda";
  Deviations deviations;
  ExpectMatchesReference(ExtractFixture("safetensors/step_400", options),
                         ReadJson(FixtureDir() / "reference" / "step_400.json"), "cuda step 400",
                         deviations);
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
  const CheckpointMetrics a = ExtractFixture("bin/step_400", CpuOptions(1));
  for (int batch_size : {0, 64}) {  // automatic, and everything in one batch
    const CheckpointMetrics b = ExtractFixture("bin/step_400", CpuOptions(batch_size));
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

TEST(ExtractorProgressTest, ReportsEveryBatchAndHonoursCancel) {
  const fs::path checkpoint = FixtureDir() / "bin" / "step_0";
  ProbeSpec spec;
  spec.file = FixtureDir() / "probe.jsonl";
  auto extractor = CreateTorchExtractor(CpuOptions(4));
  ASSERT_TRUE(extractor.ok());
  auto probe = (*extractor)->BuildProbe(checkpoint, spec);
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::vector<std::pair<int, int>> seen;
  ExtractCallbacks progress;
  progress.progress = [&](int done, int total) { seen.push_back({done, total}); };
  auto metrics = (*extractor)->Extract(checkpoint, *probe, progress);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const int total = static_cast<int>((probe->samples.size() + 3) / 4);
  ASSERT_EQ(seen.size(), static_cast<size_t>(total));
  EXPECT_EQ(seen.back(), std::make_pair(total, total));

  int polls = 0;
  ExtractCallbacks cancel_after_one_batch;
  cancel_after_one_batch.cancelled = [&] { return ++polls > 1; };
  auto cancelled = (*extractor)->Extract(checkpoint, *probe, cancel_after_one_batch);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace anisoscope::analysis
