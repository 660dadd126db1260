// The engine against the independent float64 reference (tests/reference, written from the
// Hugging Face GPTNeoXModel / GPT2Model / LlamaModel / Olmo2Model definitions) on
// checkpoints of real (tiny) causal-LM training runs: Pythia-style (float16 .bin, rotary,
// parallel residual), CRFM-style (float32, Conv1D, inverse-layer-index scaling),
// LLaMA-style (grouped-query, tied, llama3 rope, .bin shards) and OLMo-2-style (q/k norms,
// post-norms, safetensors shards), their config variants, padded probes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/analysis/extractor/reference_comparison.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

fs::path Fixture() { return FixturePath("causal_runs"); }

// Extracts OUT/run/checkpoint and compares it with OUT/reference/reference_run/checkpoint.
CheckpointMetrics ExpectCheckpointMatches(const std::string& run, const std::string& checkpoint,
                                          const std::string& reference_run,
                                          Deviations& deviations) {
  const CheckpointMetrics got =
      ExtractCheckpoint(Fixture() / run / checkpoint, Fixture() / "probe.jsonl");
  ExpectMatchesReference(got,
                         ReadJson(Fixture() / "reference" / reference_run / (checkpoint + ".json")),
                         run + "/" + checkpoint, deviations);
  return got;
}

struct Series {
  std::string run;
  std::string family;
  std::vector<std::string> checkpoints;
};

class CausalReferenceTest : public ::testing::TestWithParam<Series> {};

TEST_P(CausalReferenceTest, MatchesFloat64ReferenceAtEveryStep) {
  ASSERT_TRUE(fs::exists(Fixture() / "probe.jsonl")) << "fixture missing at " << Fixture();
  const Series& series = GetParam();
  Deviations deviations;
  for (const std::string& checkpoint : series.checkpoints) {
    const CheckpointMetrics got =
        ExpectCheckpointMatches(series.run, checkpoint, series.run, deviations);
    EXPECT_EQ(got.shape.family, series.family);
    EXPECT_TRUE(got.shape.causal) << series.run;
  }
  std::printf("%s: largest deviation from the reference: %s\n", series.run.c_str(),
              deviations.ToString().c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Suites, CausalReferenceTest,
    ::testing::Values(
        Series{"pythia", "gpt_neox", {"step0", "step100", "step200", "step300"}},
        Series{
            "crfm", "gpt2", {"checkpoint-0", "checkpoint-100", "checkpoint-200", "checkpoint-300"}},
        Series{"llama", "llama", {"step0", "step100", "step200", "step300"}},
        Series{"olmo2",
               "olmo2",
               {"stage1-step0-tokens2M", "stage1-step100-tokens2M", "stage1-step200-tokens2M",
                "stage1-step300-tokens2M"}}),
    [](const ::testing::TestParamInfo<Series>& info) { return info.param.run; });

// A variant proves its config key is honoured only if its reference differs from the
// base run's by far more than the tolerance.
void ExpectReferencesDiffer(const std::string& variant, const std::string& base,
                            const std::string& checkpoint) {
  const nlohmann::json a = ReadJson(Fixture() / "reference" / variant / (checkpoint + ".json"));
  const nlohmann::json b = ReadJson(Fixture() / "reference" / base / (checkpoint + ".json"));
  double largest = 0;
  for (size_t i = 0; i < a["heads"].size(); ++i) {
    largest = std::max(largest, std::abs(a["heads"][i]["attn_entropy"].get<double>() -
                                         b["heads"][i]["attn_entropy"].get<double>()));
  }
  EXPECT_GT(largest, 1e-2) << variant << " computes the same attention as " << base;
}

TEST(CausalVariantsTest, SequentialResidualMatchesItsReference) {
  Deviations deviations;
  ExpectCheckpointMatches("pythia_sequential", "step300", "pythia_sequential", deviations);
  ExpectReferencesDiffer("pythia_sequential", "pythia", "step300");
}

TEST(CausalVariantsTest, Float16SafetensorsMatchTheBinReference) {
  Deviations deviations;
  ExpectCheckpointMatches("pythia_safetensors", "step300", "pythia", deviations);
}

TEST(CausalVariantsTest, UnscaledByLayerIndexMatchesItsReference) {
  Deviations deviations;
  ExpectCheckpointMatches("crfm_unscaled", "checkpoint-300", "crfm_unscaled", deviations);
  ExpectReferencesDiffer("crfm_unscaled", "crfm", "checkpoint-300");
}

TEST(CausalVariantsTest, LinearRopeScalingMatchesItsReference) {
  Deviations deviations;
  ExpectCheckpointMatches("llama_linear_rope", "step300", "llama_linear_rope", deviations);
  ExpectReferencesDiffer("llama_linear_rope", "llama", "step300");
}

// Rotation shrinks the averaged rotated dimensions: the pre-rotary means must differ from
// the post-rotary ones there, and equal them on the pass-through dimensions.
TEST(CausalVariantsTest, PreRotaryMeansDifferOnlyOnRotatedDimensions) {
  const CheckpointMetrics got =
      ExtractCheckpoint(Fixture() / "pythia" / "step300", Fixture() / "probe.jsonl");
  const nlohmann::json config = ReadJson(Fixture() / "pythia" / "step300" / "config.json");
  ASSERT_FALSE(got.heads.empty());
  const size_t rotary =
      static_cast<size_t>(got.shape.head_dim * config["rotary_pct"].get<double>());
  double rotated_difference = 0;
  for (const HeadMetrics& head : got.heads) {
    ASSERT_EQ(head.q_mean_pre_rotary.size(), head.q_mean.size());
    for (size_t j = 0; j < head.q_mean.size(); ++j) {
      const double difference = std::abs(head.q_mean_pre_rotary[j] - head.q_mean[j]);
      if (j < rotary) {
        rotated_difference = std::max(rotated_difference, difference);
      } else {
        EXPECT_NEAR(difference, 0, 1e-6) << "layer " << head.layer << " head " << head.head;
      }
    }
  }
  EXPECT_GT(rotated_difference, 1e-3);
}

}  // namespace
}  // namespace anisoscope::analysis
