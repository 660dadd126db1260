// The copies of the metric catalogue in the docs a user reads: docs/metrics.md's tables
// (between `<!-- metric-catalog: SECTION -->` and `<!-- /metric-catalog -->`) are exactly
// what MetricTableMarkdown generates, and docs/openapi.yaml names every metric and vector
// kind. On a mismatch: `anisoscope metrics --format markdown --section SECTION` prints the
// table to paste.
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "analysis/metric_catalog/metric_catalog.h"
#include "gtest/gtest.h"

namespace anisoscope::analysis {
namespace {

std::string ReadDoc(const std::string& relative) {
  const char* root = std::getenv("ANISOSCOPE_SOURCE_DIR");
  EXPECT_NE(root, nullptr) << "ANISOSCOPE_SOURCE_DIR is not set";
  std::ifstream in(std::string(root == nullptr ? "." : root) + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(MetricsCatalogDocTest, MetricsMdTablesAreTheCatalogues) {
  const std::string doc = ReadDoc("docs/metrics.md");
  const std::regex block(R"(<!-- metric-catalog: (\w+) -->\n([\s\S]*?)<!-- /metric-catalog -->)");
  std::map<std::string, int> seen;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), block); it != std::sregex_iterator();
       ++it) {
    const std::string section = (*it)[1];
    ++seen[section];
    const std::string expected = MetricTableMarkdown(section);
    EXPECT_FALSE(expected.empty()) << "unknown section " << section;
    EXPECT_EQ((*it)[2].str(), expected)
        << "docs/metrics.md's " << section << " table differs from the catalogue "
        << "(analysis/metric_catalog/metric_catalog.cc); `anisoscope metrics --format markdown "
        << "--section " << section << "` prints it";
  }
  for (const std::string& section : MetricTableSections()) {
    EXPECT_EQ(seen[section], 1) << "docs/metrics.md has no single " << section << " table";
  }
}

// The vector kind's enum of GET /api/v1/vectors is the catalogue's kinds, in its order, and
// GET /api/v1/series' description names every scalar metric.
TEST(MetricsCatalogDocTest, OpenApiNamesEveryMetric) {
  const std::string yaml = ReadDoc("docs/openapi.yaml");
  const std::regex kinds(R"(enum: \[(q_mean[^\]]*)\])");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(yaml, match, kinds)) << "no enum of vector kinds";
  std::string listed = std::regex_replace(match[1].str(), std::regex(R"(\s+)"), "");
  std::string expected;
  for (const std::string& kind : AllVectorKinds()) {
    expected += (expected.empty() ? "" : ",") + kind;
  }
  EXPECT_EQ(listed, expected);

  const size_t series = yaml.find("operationId: querySeries");
  ASSERT_NE(series, std::string::npos);
  const std::string description = yaml.substr(series, yaml.find("parameters:", series) - series);
  for (const MetricInfo& info : MetricCatalog()) {
    if (info.kind != MetricKind::kScalar) continue;
    EXPECT_NE(description.find("`" + info.name + "`"), std::string::npos)
        << "GET /api/v1/series' description does not name " << info.name;
  }
  EXPECT_NE(yaml.find("/api/v1/metrics-catalog:"), std::string::npos);
}

}  // namespace
}  // namespace anisoscope::analysis
