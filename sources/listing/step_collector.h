// StepCollector: what the per-step listings of a source, answering in parallel, add up to.
// Each step is listed, or is a problem of its own (the listing goes on), or fails the whole
// listing; once every step has answered, steps and problems are sorted by step and the
// duplicates found. The one place the Hub's and S3's listings gather their steps.
#pragma once

#include <cstdint>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::listing {

class StepCollector {
 public:
  // Steps and problems are added to `listing`, which must outlive the collector.
  explicit StepCollector(SourceListing& listing) : listing_(listing) {}

  // Whether the listing has failed already (the steps not yet asked need not be). Thread-safe.
  bool failed() const;
  // The answer for step `step` named `name`; `is_problem` says whether its error is the
  // step's own (else the first such error fails the listing). Thread-safe.
  void Add(absl::string_view name, int64_t step, absl::StatusOr<RemoteStep> listed,
           bool is_problem);
  // The first failure; else OK, with the listing sorted by step, its duplicates (`s3`: the
  // rule of FindDuplicates) and `counters`. Call once every Add has returned.
  absl::Status Finish(bool s3, const ListingCounters& counters);

 private:
  SourceListing& listing_;
  mutable std::mutex mutex_;
  absl::Status failure_;
};

}  // namespace anisoscope::listing
