// The metric catalogue (analysis/metric_catalog/metric_catalog.h): every entry complete, names
// unique, and the name lists of checkpoint_metrics.h derived from it.
#include "analysis/metric_catalog/metric_catalog.h"

#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

TEST(MetricCatalogTest, EveryEntryIsCompleteAndNamedOnce) {
  std::set<std::string> names;
  for (const MetricInfo& info : MetricCatalog()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(names.insert(info.name).second) << "named twice";
    EXPECT_FALSE(MetricGroupName(info.group).empty());
    EXPECT_FALSE(MetricScopeName(info.scope).empty());
    EXPECT_FALSE(info.label.empty());
    EXPECT_FALSE(info.unit.empty());
    EXPECT_FALSE(info.definition.empty());
    EXPECT_FALSE(info.meaning.empty());
    EXPECT_EQ(info.definition.find('\n'), std::string::npos);
    EXPECT_EQ(info.meaning.find('\n'), std::string::npos);
    EXPECT_EQ(FindMetric(info.name), &info);
    // Derived at query time exactly when it has no stored field, and only per block.
    EXPECT_EQ(info.derived, std::holds_alternative<std::monostate>(info.field));
    EXPECT_EQ(info.derived, info.scope == MetricScope::kBlock);
    EXPECT_TRUE(info.baseline.empty() || info.baseline == "head" || info.baseline == "hidden");
    if (info.kind == MetricKind::kVector) {
      EXPECT_TRUE(info.baseline.empty());
    }
    // Only vectors are kept per token sample or for rotary models only.
    if (info.token_sample || info.families == MetricFamilies::kRotary) {
      EXPECT_EQ(info.kind, MetricKind::kVector);
    }
  }
  EXPECT_EQ(FindMetric("no_such_metric"), nullptr);
}

TEST(MetricCatalogTest, TheNameListsAreTheCatalogues) {
  EXPECT_EQ(PerHeadMetricNames(), CatalogNames(MetricScope::kHead, MetricKind::kScalar));
  EXPECT_EQ(PerHiddenStateMetricNames(),
            CatalogNames(MetricScope::kHiddenState, MetricKind::kScalar));
  EXPECT_EQ(PerCheckpointMetricNames(),
            CatalogNames(MetricScope::kCheckpoint, MetricKind::kScalar));
  EXPECT_EQ(PerBlockMetricNames(), CatalogNames(MetricScope::kBlock, MetricKind::kScalar));
  EXPECT_EQ(PerHeadVectorKinds(), CatalogNames(MetricScope::kHead, MetricKind::kVector));
  EXPECT_EQ(PerHiddenStateVectorKinds(),
            CatalogNames(MetricScope::kHiddenState, MetricKind::kVector));
  EXPECT_EQ(PerCheckpointVectorKinds(),
            CatalogNames(MetricScope::kCheckpoint, MetricKind::kVector));
  EXPECT_EQ(TokenSampleKinds(), (std::vector<std::string>{"q_sample", "k_sample"}));
  // The counts the stored rows and the docs rely on: 11 per head, 11 per hidden state, one
  // per checkpoint, one per block; 8 vector kinds.
  EXPECT_EQ(PerHeadMetricNames().size(), 11u);
  EXPECT_EQ(PerHiddenStateMetricNames().size(), 11u);
  EXPECT_EQ(PerCheckpointMetricNames().size(), 1u);
  EXPECT_EQ(PerBlockMetricNames().size(), 1u);
  EXPECT_EQ(AllVectorKinds().size(), 8u);
  EXPECT_EQ(MetricCatalog().size(), 11u + 11u + 1u + 1u + 8u);
}

TEST(MetricCatalogTest, ScopesGroupsAndUndefinedComeFromTheCatalogue) {
  for (const MetricInfo& info : MetricCatalog()) {
    SCOPED_TRACE(info.name);
    if (info.kind == MetricKind::kScalar) {
      EXPECT_EQ(ScopeOfMetric(info.name), info.scope);
      EXPECT_EQ(ScopeOfVectorKind(info.name), std::nullopt);
    } else {
      EXPECT_EQ(ScopeOfVectorKind(info.name), info.scope);
      EXPECT_EQ(ScopeOfMetric(info.name), std::nullopt);
    }
    EXPECT_EQ(MayBeUndefined(info.name), info.may_be_undefined);
  }
  EXPECT_EQ(FindMetric("q_mean_pre_rotary")->families, MetricFamilies::kRotary);
  EXPECT_EQ(FindMetric("attn_entropy")->group, MetricGroup::kCore);
  EXPECT_EQ(FindMetric("attn_max_prob")->group, MetricGroup::kSharpness);
  EXPECT_EQ(FindMetric("hidden_spectrum")->group, MetricGroup::kSpectra);
  EXPECT_EQ(FindMetric("final_norm_gain")->group, MetricGroup::kWeights);
  EXPECT_TRUE(FindMetric("q_sample")->token_sample);
  EXPECT_FALSE(MayBeUndefined("attn_entropy"));
  EXPECT_FALSE(MayBeUndefined("no_such_metric"));
}

// Every group has a metric, and `core` holds Godey et al. §5's.
TEST(MetricCatalogTest, EveryGroupHasMetrics) {
  for (const NamedMetricGroup& group : AllMetricGroups()) {
    int count = 0;
    for (const MetricInfo& info : MetricCatalog()) count += info.group == group.group;
    EXPECT_GT(count, 0) << group.name;
  }
  for (const char* name : {"q_mean_norm", "k_mean_norm", "qk_mean_dot", "qk_mean_cosine",
                           "attn_entropy", "q_anisotropy", "k_anisotropy", "hidden_anisotropy",
                           "hidden_mean_norm", "qk_mean_cosine_concat", "q_mean", "k_mean"}) {
    EXPECT_EQ(FindMetric(name)->group, MetricGroup::kCore) << name;
  }
}

// ForEachScalar and ForEachVector visit the catalogue's fields: a value set in each field
// comes back under its name.
TEST(MetricCatalogTest, ForEachVisitsEveryStoredField) {
  CheckpointMetrics metrics;
  HeadMetrics head;
  HiddenStateMetrics hidden;
  double value = 1;
  for (const MetricInfo& info : MetricCatalog()) {
    std::visit(
        [&](auto member) {
          using Member = decltype(member);
          if constexpr (std::is_same_v<Member, double HeadMetrics::*>) {
            head.*member = value++;
          } else if constexpr (std::is_same_v<Member, std::vector<double> HeadMetrics::*>) {
            head.*member = {value++};
          } else if constexpr (std::is_same_v<Member, double HiddenStateMetrics::*>) {
            hidden.*member = value++;
          } else if constexpr (std::is_same_v<Member, std::vector<double> HiddenStateMetrics::*>) {
            hidden.*member = {value++};
          } else if constexpr (std::is_same_v<Member, double CheckpointMetrics::*>) {
            metrics.*member = value++;
          } else if constexpr (std::is_same_v<Member, std::vector<double> CheckpointMetrics::*>) {
            metrics.*member = {value++};
          }
        },
        info.field);
  }
  metrics.heads = {head};
  metrics.hidden_states = {hidden};
  std::vector<std::string> scalars;
  ForEachScalar(metrics,
                [&](std::string_view name, int, int, double) { scalars.emplace_back(name); });
  std::vector<std::string> vectors;
  ForEachVector(metrics, [&](std::string_view kind, int, int, const std::vector<double>&) {
    vectors.emplace_back(kind);
  });
  std::vector<std::string> stored_scalars;
  std::vector<std::string> stored_vectors;
  for (MetricScope scope :
       {MetricScope::kHead, MetricScope::kHiddenState, MetricScope::kCheckpoint}) {
    for (const std::string& name : CatalogNames(scope, MetricKind::kScalar)) {
      stored_scalars.push_back(name);
    }
    for (const std::string& name : CatalogNames(scope, MetricKind::kVector)) {
      stored_vectors.push_back(name);
    }
  }
  EXPECT_EQ(scalars, stored_scalars);
  EXPECT_EQ(vectors, stored_vectors);
}

}  // namespace
}  // namespace anisoscope::analysis
