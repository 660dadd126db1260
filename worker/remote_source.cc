#include "worker/remote_source.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/endpoints/remote_checkpoint.h"
#include "sources/fetch/fetch_plan.h"

namespace anisoscope::worker {

namespace pb = ::anisoscope::v1;

absl::StatusOr<std::unique_ptr<RemoteSource>> RemoteSource::Create(Options options) {
  if (options.cache_dir.empty() || options.cache_max_bytes == 0) {
    return absl::InvalidArgumentError(
        "--cache-dir must name a folder and --cache-max-bytes be > 0");
  }
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(options.cache_dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-dir ", options.cache_dir, ": ", error.message()));
  }
  // Absolute, as the engine's gate takes paths beneath it.
  options.cache_dir = absolute.lexically_normal().string();
  while (options.cache_dir.size() > 1 && options.cache_dir.back() == '/')
    options.cache_dir.pop_back();
  ASSIGN_OR_RETURN(sources::SourceClients clients,
                   sources::MakeSourceClients(options.endpoints, options.transfer));
  return std::unique_ptr<RemoteSource>(
      new RemoteSource(std::move(options), std::move(clients), absl::OkStatus()));
}

std::unique_ptr<RemoteSource> RemoteSource::Unavailable(const absl::Status& why) {
  return std::unique_ptr<RemoteSource>(
      new RemoteSource(Options{}, sources::SourceClients{},
                       absl::UnavailableError(absl::StrCat(
                           "this worker cannot fetch remote steps: ", why.message()))));
}

absl::StatusOr<fetch::FetchStep> RemoteSource::Plan(const pb::RemoteCheckpoint& remote,
                                                    int64_t step) const {
  RETURN_IF_ERROR(unavailable_);
  ASSIGN_OR_RETURN(const listing::RemoteStep listed,
                   sources::FromRemoteCheckpoint(remote, step, options_.endpoints));
  return fetch::PlanFetch(listed);
}

absl::StatusOr<const fetch::StepFetcher*> RemoteSource::Fetcher(pb::SourceKind kind) {
  RETURN_IF_ERROR(unavailable_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (cache_ == nullptr) {
    cache::SourceCacheOptions cache_options;
    cache_options.dir = options_.cache_dir;
    cache_options.max_bytes = options_.cache_max_bytes;
    absl::StatusOr<std::unique_ptr<cache::SourceCache>> made =
        cache::SourceCache::Create(cache_options);
    if (!made.ok()) {
      return absl::UnavailableError(absl::StrCat("this worker's --cache-dir ", options_.cache_dir,
                                                 " cannot be used: ", made.status().message()));
    }
    cache_ = *std::move(made);
    hub_ = std::make_unique<fetch::StepFetcher>(cache_.get(), clients_.hub.get());
    s3_ = std::make_unique<fetch::StepFetcher>(cache_.get(), clients_.s3.get());
  }
  switch (kind) {
    case pb::SOURCE_KIND_HUB:
      return hub_.get();
    case pb::SOURCE_KIND_S3:
      return s3_.get();
    case pb::SOURCE_KIND_UNSPECIFIED:
    case pb::SourceKind_INT_MIN_SENTINEL_DO_NOT_USE_:
    case pb::SourceKind_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("RemoteCheckpoint.kind: unknown source kind ", static_cast<int>(kind)));
}

cache::SourceCache* RemoteSource::cache() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.get();
}

}  // namespace anisoscope::worker
