// From the names a source offers (branches, repos, folders) to the steps to list: each name's
// step by analysis::ParseStep (the rules of local --checkpoints folders), narrowed by an
// explicit list or a glob. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::listing {

// Narrows the names of a source (--revisions A,B or a glob such as "step1*"); both empty:
// every name.
struct StepSelection {
  std::vector<std::string> names;  // exactly these (each must exist)
  std::string glob;                // fnmatch(3) pattern over the names
};

struct NamedStep {
  std::string name;
  int64_t step = 0;
};

struct SelectedSteps {
  std::vector<NamedStep> steps;           // sorted by step
  std::vector<std::string> without_step;  // selected names that carry no step, sorted
  std::vector<ListingProblem> missing;    // names asked for that `names` lacks
};

// The selected names among `names` with their steps. INVALID_ARGUMENT naming `source` and
// both names when two share a step (as DiscoverSteps does).
absl::StatusOr<SelectedSteps> SelectSteps(const std::vector<std::string>& names,
                                          const StepSelection& selection, absl::string_view source);

}  // namespace anisoscope::listing
