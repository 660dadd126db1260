#include "tests/analysis/extractor/reference_comparison.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
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
  auto probe = (*extractor)->BuildProbe(checkpoint, spec, FileGate::Host());
  EXPECT_TRUE(probe.ok()) << probe.status();
  if (!probe.ok()) return CheckpointMetrics();
  auto metrics = (*extractor)->Extract(checkpoint, *probe, {}, FileGate::Host());
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *metrics : CheckpointMetrics();
}

void Deviations::Absolute(double a, double b) { absolute = std::max(absolute, std::abs(a - b)); }
void Deviations::Relative(double value) { relative = std::max(relative, value); }

std::string Deviations::ToString() const {
  char text[160];
  std::snprintf(text, sizeof(text),
                "%.2e absolute (cosines, entropies, anisotropies, probabilities, spectra), %.2e "
                "relative (norms, dots, magnitudes)",
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

// Token samples: M x d_h, each row within 1e-3 of its norm (as the means).
void ExpectSamplesNear(const std::vector<double>& got, const nlohmann::json& head, const char* kind,
                       const std::string& at) {
  if (!head.contains(kind)) {
    EXPECT_TRUE(got.empty()) << at << " " << kind << ": samples the reference did not keep";
    return;
  }
  const nlohmann::json& rows = head[kind];
  ASSERT_FALSE(rows.empty()) << at << " " << kind;
  const size_t dim = rows[0].size();
  ASSERT_EQ(got.size(), rows.size() * dim) << at << " " << kind;
  for (size_t j = 0; j < rows.size(); ++j) {
    const std::vector<double> row(got.begin() + j * dim, got.begin() + (j + 1) * dim);
    ExpectVectorNear(row, rows[j], at + " " + kind + "[" + std::to_string(j) + "]");
  }
}

using NamedValues = std::initializer_list<std::pair<const char*, double>>;

// Each value within 2e-4 of want[name] (cosines, probabilities, scores, ratios).
void ExpectAbsolute(NamedValues got, const nlohmann::json& want, const std::string& at,
                    Deviations& deviations) {
  for (const auto& [name, value] : got) {
    deviations.Absolute(value, want[name].get<double>());
    EXPECT_NEAR(value, want[name].get<double>(), 2e-4) << at << " " << name;
  }
}

// Each value within 1e-3 relative of want[name] (norms, dots, magnitudes).
void ExpectRelative(NamedValues got, const nlohmann::json& want, const std::string& at,
                    Deviations& deviations) {
  for (const auto& [name, value] : got) {
    deviations.Relative(Relative(value, want[name].get<double>()));
    EXPECT_LT(Relative(value, want[name].get<double>()), 1e-3) << at << " " << name;
  }
}

// One hidden state: anisotropy, scores, ratios and uniformities within 2e-4 absolute; the
// mean norm, max/median |x| and the skewness within 1e-3 relative; each σ_i/σ_1 within 2e-4.
void ExpectHiddenStateMatches(const HiddenStateMetrics& got, const nlohmann::json& want,
                              const std::string& at, Deviations& deviations) {
  ExpectAbsolute({{"anisotropy", got.anisotropy},
                  {"sv_median", got.sv_median},
                  {"ev_1", got.ev_1},
                  {"ev_10", got.ev_10},
                  {"isoscore", got.isoscore},
                  {"token_uniformity", got.token_uniformity},
                  {"first_token_uniformity", got.first_token_uniformity}},
                 want, at, deviations);
  ExpectRelative({{"mean_norm", got.mean_norm},
                  {"sv_skewness", got.sv_skewness},
                  {"max_abs", got.max_abs},
                  {"median_abs", got.median_abs}},
                 want, at, deviations);
  const auto spectrum = want["spectrum"].get<std::vector<double>>();
  ASSERT_EQ(got.spectrum.size(), spectrum.size()) << at << " spectrum";
  for (size_t j = 0; j < spectrum.size(); ++j) {
    deviations.Absolute(got.spectrum[j], spectrum[j]);
    EXPECT_NEAR(got.spectrum[j], spectrum[j], 2e-4) << at << " spectrum[" << j << "]";
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
    ExpectAbsolute({{"qk_mean_cosine", g.qk_mean_cosine},
                    {"attn_entropy", g.attn_entropy},
                    {"q_anisotropy", g.q_anisotropy},
                    {"k_anisotropy", g.k_anisotropy},
                    {"attn_max_prob", g.attn_max_prob},
                    {"attn_min_prob", g.attn_min_prob},
                    {"attn_median_prob", g.attn_median_prob},
                    {"attn_first_token_mass", g.attn_first_token_mass}},
                   w, at, deviations);
    ExpectRelative({{"q_mean_norm", g.q_mean_norm},
                    {"k_mean_norm", g.k_mean_norm},
                    {"qk_mean_dot", g.qk_mean_dot}},
                   w, at, deviations);
    ExpectVectorNear(g.q_mean, w["q_mean"], at + " q_mean");
    ExpectVectorNear(g.k_mean, w["k_mean"], at + " k_mean");
    ExpectSamplesNear(g.q_sample, w, "q_sample", at);
    ExpectSamplesNear(g.k_sample, w, "k_sample", at);
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
    ExpectHiddenStateMatches(got.hidden_states[i], w, where + " hidden state " + std::to_string(i),
                             deviations);
  }
  EXPECT_EQ(got.token_samples, want["token_samples"].get<int64_t>()) << where;
  ExpectAbsolute({{"embed_partition_isotropy", got.embed_partition_isotropy}}, want, where,
                 deviations);
  ExpectVectorNear(got.final_norm_gain, want["final_norm_gain"], where + " final_norm_gain");
}

}  // namespace anisoscope::analysis
