#include "sources/listing/step_names.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/checkpoint/step_discovery.h"
#include "sources/listing/listing_paths.h"

namespace anisoscope::listing {

absl::StatusOr<SelectedSteps> SelectSteps(const std::vector<std::string>& names,
                                          const StepSelection& selection,
                                          absl::string_view source) {
  const std::set<std::string> offered(names.begin(), names.end());
  std::set<std::string> chosen;
  SelectedSteps out;
  if (!selection.names.empty()) {
    for (const std::string& name : selection.names) {
      if (offered.count(name) != 0) {
        chosen.insert(name);
        continue;
      }
      const std::optional<int64_t> step = analysis::ParseStep(name);
      out.missing.push_back(
          {name, step.value_or(0),
           absl::StrCat(source, ": no revision named '", absl::CHexEscape(name), "'")});
    }
  } else {
    for (const std::string& name : offered) {
      if (selection.glob.empty() || MatchesGlob(selection.glob, name)) chosen.insert(name);
    }
  }
  for (const std::string& name : chosen) {
    const std::optional<int64_t> step = analysis::ParseStep(name);
    if (step.has_value()) {
      out.steps.push_back({name, *step});
    } else {
      out.without_step.push_back(name);
    }
  }
  std::sort(out.steps.begin(), out.steps.end(), [](const NamedStep& a, const NamedStep& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  for (size_t i = 1; i < out.steps.size(); ++i) {
    if (out.steps[i].step == out.steps[i - 1].step) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": '", absl::CHexEscape(out.steps[i - 1].name), "' and '",
          absl::CHexEscape(out.steps[i].name), "' both name step ", out.steps[i].step));
    }
  }
  std::sort(out.missing.begin(), out.missing.end(),
            [](const ListingProblem& a, const ListingProblem& b) { return a.step < b.step; });
  return out;
}

}  // namespace anisoscope::listing
