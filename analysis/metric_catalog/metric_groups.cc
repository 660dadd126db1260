#include "analysis/metric_catalog/metric_groups.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anisoscope::analysis {

const std::vector<NamedMetricGroup>& AllMetricGroups() {
  static const std::vector<NamedMetricGroup> groups = {
      {MetricGroup::kCore, "core",
       "Godey et al. 5: mean Q and K, norms, dot, cosine, entropy, anisotropy"},
      {MetricGroup::kSharpness, "sharpness",
       "attention rows' max, min, median probability, first-token mass"},
      {MetricGroup::kSpectra, "spectra", "hidden states' singular value spectrum, IsoScore"},
      {MetricGroup::kUniformity, "uniformity", "hidden states' TokenUni, first-token uniformity"},
      {MetricGroup::kActivations, "activations",
       "hidden states' largest and median absolute activation"},
      {MetricGroup::kWeights, "weights", "embedding partition isotropy, final norm's gain"},
  };
  return groups;
}

absl::StatusOr<MetricGroups> ParseMetricGroups(std::string_view text) {
  const std::string whole(absl::StripAsciiWhitespace(std::string(text)));
  if (whole.empty() || whole == "all") return kAllMetricGroups;
  MetricGroups groups = static_cast<uint32_t>(MetricGroup::kCore);
  for (absl::string_view piece : absl::StrSplit(whole, ',')) {
    const std::string name(absl::StripAsciiWhitespace(piece));
    if (name == "all") {
      groups = kAllMetricGroups;
      continue;
    }
    bool found = false;
    for (const NamedMetricGroup& group : AllMetricGroups()) {
      if (name == group.name) {
        groups |= static_cast<uint32_t>(group.group);
        found = true;
        break;
      }
    }
    if (!found) {
      std::vector<std::string> known;
      for (const NamedMetricGroup& group : AllMetricGroups()) known.emplace_back(group.name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown metric group \"", name, "\" (known: ", absl::StrJoin(known, ", "), ", or all)"));
    }
  }
  return groups;
}

std::string MetricGroupsText(MetricGroups groups) {
  if ((groups & kAllMetricGroups) == kAllMetricGroups) return "all";
  std::vector<std::string> names;
  for (const NamedMetricGroup& group : AllMetricGroups()) {
    if (Has(groups, group.group)) names.emplace_back(group.name);
  }
  return absl::StrJoin(names, ",");
}

}  // namespace anisoscope::analysis
