// A job computes only the metric groups it asks for (analysis/metric_catalog/metric_groups.h): what
// it stores is exactly the names of those groups, and each value is bit-identical to the one
// an `all` job computes (skipping a group changes no other group's arithmetic).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/extractor/extractor.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "tests/analysis/extractor/reference_comparison.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

using Key = std::tuple<std::string, int, int>;  // name, layer, head

struct Stored {
  std::map<Key, double> scalars;
  std::map<Key, std::vector<double>> vectors;
  std::set<std::string> names;  // scalars and vector kinds
};

Stored StoredOf(const CheckpointMetrics& metrics) {
  Stored stored;
  ForEachScalar(metrics, [&](std::string_view name, int layer, int head, double value) {
    stored.scalars[{std::string(name), layer, head}] = value;
    stored.names.insert(std::string(name));
  });
  ForEachVector(metrics,
                [&](std::string_view kind, int layer, int head, const std::vector<double>& values) {
                  stored.vectors[{std::string(kind), layer, head}] = values;
                  stored.names.insert(std::string(kind));
                });
  return stored;
}

CheckpointMetrics ExtractWithGroups(const fs::path& checkpoint, const fs::path& probe_file,
                                    MetricGroups groups) {
  auto extractor = CreateTorchExtractor(TestOptions(5));
  EXPECT_TRUE(extractor.ok()) << extractor.status();
  if (!extractor.ok()) return CheckpointMetrics();
  ProbeSpec spec;
  spec.file = probe_file;
  spec.metric_groups = groups;
  auto probe = (*extractor)->BuildProbe(checkpoint, spec, FileGate::Host());
  EXPECT_TRUE(probe.ok()) << probe.status();
  if (!probe.ok()) return CheckpointMetrics();
  EXPECT_EQ(probe->metric_groups, groups);
  auto metrics = (*extractor)->Extract(checkpoint, *probe, {}, FileGate::Host());
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *metrics : CheckpointMetrics();
}

// The stored names of `groups` per the catalogue, for a model with or without rotary.
std::set<std::string> CatalogNamesOf(MetricGroups groups, bool rotary) {
  std::set<std::string> names;
  for (const MetricInfo& info : MetricCatalog()) {
    if (info.derived || !Has(groups, info.group)) continue;
    if (info.families == MetricFamilies::kRotary && !rotary) continue;
    names.insert(info.name);
  }
  return names;
}

// For `core` alone and for core plus each other group: exactly the catalogue's names of
// those groups, each value equal (==, not near) to the all job's.
void ExpectGroupsMatchAll(const fs::path& checkpoint, const fs::path& probe, bool rotary) {
  const CheckpointMetrics all = ExtractWithGroups(checkpoint, probe, kAllMetricGroups);
  const Stored everything = StoredOf(all);
  EXPECT_EQ(everything.names, CatalogNamesOf(kAllMetricGroups, rotary));
  std::vector<MetricGroups> asked = {static_cast<MetricGroups>(MetricGroup::kCore)};
  for (const NamedMetricGroup& group : AllMetricGroups()) {
    if (group.group != MetricGroup::kCore) {
      asked.push_back(static_cast<uint32_t>(MetricGroup::kCore) |
                      static_cast<uint32_t>(group.group));
    }
  }
  for (MetricGroups groups : asked) {
    SCOPED_TRACE(MetricGroupsText(groups));
    const CheckpointMetrics some = ExtractWithGroups(checkpoint, probe, groups);
    EXPECT_EQ(some.groups, groups);
    const Stored stored = StoredOf(some);
    EXPECT_EQ(stored.names, CatalogNamesOf(groups, rotary));
    for (const auto& [key, value] : stored.scalars) {
      ASSERT_EQ(everything.scalars.count(key), 1u) << std::get<0>(key);
      EXPECT_EQ(value, everything.scalars.at(key))
          << std::get<0>(key) << " layer " << std::get<1>(key) << " head " << std::get<2>(key);
    }
    for (const auto& [key, values] : stored.vectors) {
      ASSERT_EQ(everything.vectors.count(key), 1u) << std::get<0>(key);
      EXPECT_EQ(values, everything.vectors.at(key))
          << std::get<0>(key) << " layer " << std::get<1>(key) << " head " << std::get<2>(key);
    }
    EXPECT_EQ(some.num_tokens, all.num_tokens);
    EXPECT_EQ(some.token_samples, all.token_samples);
  }
}

TEST(MetricGroupsExtractTest, BertCoreJobStoresExactlyCoreNamesWithTheAllJobsValues) {
  const fs::path fixture = FixturePath("bert_run");
  ASSERT_TRUE(fs::exists(fixture / "probe.jsonl")) << "fixture missing at " << fixture;
  ExpectGroupsMatchAll(fixture / "bin" / "step_400", fixture / "probe.jsonl", /*rotary=*/false);
}

TEST(MetricGroupsExtractTest, RotaryCausalCoreJobKeepsPreRotaryMeansAndTheAllJobsValues) {
  const fs::path fixture = FixturePath("causal_runs");
  ASSERT_TRUE(fs::exists(fixture / "probe.jsonl")) << "fixture missing at " << fixture;
  ExpectGroupsMatchAll(fixture / "pythia" / "step300", fixture / "probe.jsonl", /*rotary=*/true);
}

TEST(MetricGroupsExtractTest, ACoreJobLeavesTheOtherGroupsZeroOrEmpty) {
  const fs::path fixture = FixturePath("bert_run");
  const CheckpointMetrics core = ExtractWithGroups(
      fixture / "bin" / "step_400", fixture / "probe.jsonl", ParseMetricGroups("core").value());
  ASSERT_FALSE(core.heads.empty());
  for (const HeadMetrics& head : core.heads) {
    EXPECT_EQ(head.attn_max_prob, 0);
    EXPECT_EQ(head.attn_median_prob, 0);
    EXPECT_GT(head.attn_entropy, 0);
  }
  for (const HiddenStateMetrics& hidden : core.hidden_states) {
    EXPECT_TRUE(hidden.spectrum.empty());
    EXPECT_EQ(hidden.isoscore, 0);
    EXPECT_EQ(hidden.token_uniformity, 0);
    EXPECT_EQ(hidden.max_abs, 0);
    EXPECT_GT(hidden.mean_norm, 0);
  }
  EXPECT_TRUE(core.final_norm_gain.empty());
  EXPECT_EQ(core.embed_partition_isotropy, 0);
}

}  // namespace
}  // namespace anisoscope::analysis
