// PlanFetch: a listed step (sources/listing's RemoteStep) as what StepFetcher fetches. The
// one place a listing's names become the cache's: a Hub step is its repo's commit, recorded
// under its branch in refs/; an S3 step is its folder under the prefix.
#pragma once

#include "absl/status/statusor.h"
#include "sources/fetch/fetch_step.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::fetch {

// INVALID_ARGUMENT, naming the step, for a repo, bucket or file name the cache refuses
// (cache_names.h) or a step without files.
absl::StatusOr<FetchStep> PlanFetch(const listing::RemoteStep& step);

}  // namespace anisoscope::fetch
