#include "sources/listing/step_collector.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sources/listing/duplicates.h"

namespace anisoscope::listing {

bool StepCollector::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failure_.ok();
}

void StepCollector::Add(absl::string_view name, int64_t step, absl::StatusOr<RemoteStep> listed,
                        bool is_problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (listed.ok()) {
    listing_.steps.push_back(*std::move(listed));
  } else if (is_problem) {
    listing_.problems.push_back({std::string(name), step, std::string(listed.status().message())});
  } else if (failure_.ok()) {
    failure_ = listed.status();
  }
}

absl::Status StepCollector::Finish(bool s3, const ListingCounters& counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.ok()) return failure_;
  std::sort(listing_.steps.begin(), listing_.steps.end(),
            [](const RemoteStep& a, const RemoteStep& b) { return a.step < b.step; });
  std::sort(listing_.problems.begin(), listing_.problems.end(),
            [](const ListingProblem& a, const ListingProblem& b) { return a.step < b.step; });
  listing_.duplicates = FindDuplicates(listing_.steps, s3);
  listing_.counters = counters;
  return absl::OkStatus();
}

}  // namespace anisoscope::listing
