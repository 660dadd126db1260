#include "sources/fetch/fetch_plan.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"

namespace anisoscope::fetch {

absl::StatusOr<FetchStep> PlanFetch(const listing::RemoteStep& step) {
  FetchStep plan;
  // A Hub step has its commit; an S3 step is a folder, named by its key prefix (revision).
  const bool from_hub = !step.commit.empty();
  if (from_hub) {
    ASSIGN_OR_RETURN(plan.cache_step.repo, cache::HubModelRepo(step.repo));
    plan.cache_step.snapshot = step.commit;
    plan.cache_step.revision = step.revision;
  } else {
    ASSIGN_OR_RETURN(plan.cache_step.repo, cache::S3BucketRepo(step.repo));
    plan.cache_step.snapshot = cache::S3SnapshotName(step.revision);
  }
  if (step.files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan.cache_step.repo.display, " step ", step.name, ": no files listed"));
  }
  for (const listing::RemoteFile& file : step.files) {
    plan.cache_step.files.push_back({file.path, cache::NormalizeEtag(file.etag), file.size});
    plan.files.push_back({file.url, file.sha256});
  }
  return plan;
}

}  // namespace anisoscope::fetch
