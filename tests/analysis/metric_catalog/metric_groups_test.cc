// The metric groups a job may ask for (analysis/metric_catalog/metric_groups.h): parsing, the text
// form, and every catalogue entry in a listed group.
#include "analysis/metric_catalog/metric_groups.h"

#include <string>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

constexpr MetricGroups kCoreOnly = static_cast<MetricGroups>(MetricGroup::kCore);

TEST(MetricGroupsTest, EmptyAndAllMeanEveryGroup) {
  EXPECT_EQ(ParseMetricGroups("").value(), kAllMetricGroups);
  EXPECT_EQ(ParseMetricGroups("all").value(), kAllMetricGroups);
  EXPECT_EQ(ParseMetricGroups(" all ").value(), kAllMetricGroups);
  EXPECT_EQ(ParseMetricGroups("core,all").value(), kAllMetricGroups);
  EXPECT_EQ(MetricGroupsText(kAllMetricGroups), "all");
}

TEST(MetricGroupsTest, CoreIsAlwaysIncludedAndTheTextRoundTrips) {
  EXPECT_EQ(ParseMetricGroups("core").value(), kCoreOnly);
  const MetricGroups spectra = ParseMetricGroups("spectra").value();
  EXPECT_TRUE(Has(spectra, MetricGroup::kCore));
  EXPECT_TRUE(Has(spectra, MetricGroup::kSpectra));
  EXPECT_FALSE(Has(spectra, MetricGroup::kSharpness));
  EXPECT_EQ(MetricGroupsText(spectra), "core,spectra");
  // Order and spaces do not matter; the text follows AllMetricGroups' order.
  EXPECT_EQ(MetricGroupsText(ParseMetricGroups("weights, sharpness ,core").value()),
            "core,sharpness,weights");
  std::string every;
  for (const NamedMetricGroup& group : AllMetricGroups()) {
    every += every.empty() ? group.name : std::string(",") + group.name;
    EXPECT_EQ(ParseMetricGroups(group.name).value(),
              kCoreOnly | static_cast<MetricGroups>(group.group))
        << group.name;
    EXPECT_NE(std::string(group.summary), "") << group.name;
  }
  EXPECT_EQ(ParseMetricGroups(every).value(), kAllMetricGroups);
  EXPECT_EQ(MetricGroupsText(ParseMetricGroups(MetricGroupsText(spectra)).value()), "core,spectra");
}

TEST(MetricGroupsTest, AnUnknownGroupIsNamedWithTheKnownOnes) {
  const auto parsed = ParseMetricGroups("core,spectrum");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(parsed.status().message());
  EXPECT_NE(message.find("\"spectrum\""), std::string::npos) << message;
  for (const NamedMetricGroup& group : AllMetricGroups()) {
    EXPECT_NE(message.find(group.name), std::string::npos) << message;
  }
  EXPECT_FALSE(ParseMetricGroups("core,,spectra").ok());
}

TEST(MetricGroupsTest, EveryStoredNameHasAGroupAndSharpnessIsNotCore) {
  EXPECT_EQ(MetricGroupOf("attn_entropy"), MetricGroup::kCore);
  EXPECT_EQ(MetricGroupOf("hidden_anisotropy"), MetricGroup::kCore);
  EXPECT_EQ(MetricGroupOf("attn_max_prob"), MetricGroup::kSharpness);
  EXPECT_EQ(MetricGroupOf("hidden_spectrum"), MetricGroup::kSpectra);
  EXPECT_EQ(MetricGroupOf("hidden_token_uniformity"), MetricGroup::kUniformity);
  EXPECT_EQ(MetricGroupOf("hidden_median_abs"), MetricGroup::kActivations);
  EXPECT_EQ(MetricGroupOf("final_norm_gain"), MetricGroup::kWeights);
  for (const MetricInfo& info : MetricCatalog()) {
    EXPECT_EQ(MetricGroupOf(info.name), info.group) << info.name;
  }
}

}  // namespace
}  // namespace anisoscope::analysis
