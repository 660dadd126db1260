// Metric groups: the sets of metrics a job may ask for (`anisoscope submit --metrics
// core,spectra`), so that it pays only for what it reads. Plain C++, no LibTorch; the
// catalogue (metric_catalog.h) says which group each metric belongs to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis {

enum class MetricGroup : uint32_t {
  // Godey et al. §5: Q̄/K̄ (and their pre-rotary means), their norms, dot and cosine (per
  // head and heads concatenated), attention entropy, Q/K and hidden-state anisotropy, the
  // hidden states' mean norm.
  kCore = 1u << 0,
  // The attention rows' max, min and median probability and first-token mass.
  kSharpness = 1u << 1,
  // The hidden states' singular value spectrum and its statistics, and IsoScore.
  kSpectra = 1u << 2,
  // TokenUni and first-token uniformity of the hidden states.
  kUniformity = 1u << 3,
  // The hidden states' largest and median absolute activations.
  kActivations = 1u << 4,
  // From the weights alone: the embedding's partition isotropy, the final norm's gain.
  kWeights = 1u << 5,
};

// A set of groups, as a bit mask of MetricGroup values.
using MetricGroups = uint32_t;
inline constexpr MetricGroups kAllMetricGroups = (1u << 6) - 1;

inline bool Has(MetricGroups groups, MetricGroup group) {
  return (groups & static_cast<uint32_t>(group)) != 0;
}

// Every group with its name ("core", "sharpness", "spectra", "uniformity", "activations",
// "weights"), in this order: the one list of them.
struct NamedMetricGroup {
  MetricGroup group;
  const char* name;
  const char* summary;  // one line, for --help and the catalogue
};
const std::vector<NamedMetricGroup>& AllMetricGroups();

// "core,spectra" -> the set; "all" or "" -> kAllMetricGroups. INVALID_ARGUMENT naming the
// unknown group and listing the known ones. `core` is always included (every other group
// is read beside it).
absl::StatusOr<MetricGroups> ParseMetricGroups(std::string_view text);
// The names of `groups`, comma-separated in AllMetricGroups' order ("all" when every one).
std::string MetricGroupsText(MetricGroups groups);

}  // namespace anisoscope::analysis
