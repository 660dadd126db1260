#include "tests/analysis/extractor/reference_comparison.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

namespace anisoscope::analysis {

namespace fs = std::filesystem;

fs::path FixturePath(const std::string& name) {
  const char* dir = std::getenv("ANISOSCOPE_FIXTURES");
  return fs::path(dir ? dir : "fixtures") / name;
}

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  return in ? nlohmann::json::parse(in) : nlohmann::json::object();
}

TorchExtractorOptions TestOptions(int batch_size) {
  TorchExtractorOptions options;
  options.batch_size = batch_size;
  const char* device = std::getenv("ANISOSCOPE_TEST_DEVICE");
  if (device != nullptr && *device != '\0') options.device = device;
  return options;
}

CheckpointMetrics ExtractCheckpoint(const fs::path& checkpoint, const fs::path& probe_file,
                                    const TorchExtractorOptions& options) {
  auto extractor = CreateTorchExtractor(options);
  EXPECT_TRUE(extractor.ok()) << extractor.status();
  if (!extractor.ok()) return CheckpointMetrics();
  ProbeSpec spec;
  spec.file = probe_file;
  auto probe = (*extractor)->BuildProbe(checkpoint, spec);
  EXPECT_TRUE(probe.ok()) << probe.status();
  if (!probe.ok()) return CheckpointMetrics();
  auto metrics = (*extractor)->Extract(checkpoint, *probe, {});
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *metrics : CheckpointMetrics();
}

void Deviations::Absolute(double a, double b) { absolute = std::max(absolute, std::abs(a - b)); }
void Deviations::Relative(double value) { relative = std::max(relative, value); }

std::string Deviations::ToString() const {
  char text[160];
  std::snprintf(text, sizeof(text),
                "%.2e absolute (cosines, entropies, anisotropies), %.2e relative (norms, dots)",
                absolute, relative);
  return text;
}

namespace {

double Relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-3); }

void ExpectVectorNear(const std::vector<double>& got, const nlohmann::json& want,
                      const std::string& at) {
  const auto expected = want.get<std::vector<double>>();
  ASSERT_EQ(got.size(), expected.size()) << at;
  double norm = 0;
  for (double x : expected) norm += x * x;
  for (size_t j = 0; j < expected.size(); ++j) {
    EXPECT_NEAR(got[j], expected[j], 1e-3 * std::sqrt(norm)) << at << "[" << j << "]";
  }
}

}  // namespace

void ExpectMatchesReference(const CheckpointMetrics& got, const nlohmann::json& want,
                            const std::string& where, Deviations& deviations) {
  ASSERT_EQ(got.num_tokens, want["num_tokens"].get<int64_t>()) << where;
  ASSERT_EQ(got.heads.size(), want["heads"].size()) << where;
  for (size_t i = 0; i < got.heads.size(); ++i) {
    const HeadMetrics& g = got.heads[i];
    const nlohmann::json& w = want["heads"][i];
    const std::string at =
        where + " layer " + std::to_string(g.layer) + " head " + std::to_string(g.head);
    ASSERT_EQ(g.layer, w["layer"].get<int>()) << at;
    ASSERT_EQ(g.head, w["head"].get<int>()) << at;
    for (const auto& [name, value] :
         {std::pair<const char*, double>{"qk_mean_cosine", g.qk_mean_cosine},
          {"attn_entropy", g.attn_entropy},
          {"q_anisotropy", g.q_anisotropy},
          {"k_anisotropy", g.k_anisotropy}}) {
      deviations.Absolute(value, w[name].get<double>());
      EXPECT_NEAR(value, w[name].get<double>(), 2e-4) << at << " " << name;
    }
    for (const auto& [name, value] : {std::pair<const char*, double>{"q_mean_norm", g.q_mean_norm},
                                      {"k_mean_norm", g.k_mean_norm},
                                      {"qk_mean_dot", g.qk_mean_dot}}) {
      deviations.Relative(Relative(value, w[name].get<double>()));
      EXPECT_LT(Relative(value, w[name].get<double>()), 1e-3) << at << " " << name;
    }
    ExpectVectorNear(g.q_mean, w["q_mean"], at + " q_mean");
    ExpectVectorNear(g.k_mean, w["k_mean"], at + " k_mean");
    if (w.contains("q_mean_pre_rotary")) {
      ExpectVectorNear(g.q_mean_pre_rotary, w["q_mean_pre_rotary"], at + " q_mean_pre_rotary");
      ExpectVectorNear(g.k_mean_pre_rotary, w["k_mean_pre_rotary"], at + " k_mean_pre_rotary");
    } else {
      EXPECT_TRUE(g.q_mean_pre_rotary.empty() && g.k_mean_pre_rotary.empty())
          << at << ": pre-rotary means for a model without rotary embedding";
    }
  }
  ASSERT_EQ(got.hidden_states.size(), want["hidden_states"].size()) << where;
  for (size_t i = 0; i < got.hidden_states.size(); ++i) {
    const nlohmann::json& w = want["hidden_states"][i];
    const std::string at = where + " hidden state " + std::to_string(i);
    deviations.Absolute(got.hidden_states[i].anisotropy, w["anisotropy"].get<double>());
    deviations.Relative(Relative(got.hidden_states[i].mean_norm, w["mean_norm"].get<double>()));
    EXPECT_NEAR(got.hidden_states[i].anisotropy, w["anisotropy"].get<double>(), 2e-4) << at;
    EXPECT_LT(Relative(got.hidden_states[i].mean_norm, w["mean_norm"].get<double>()), 1e-3) << at;
  }
}

}  // namespace anisoscope::analysis
