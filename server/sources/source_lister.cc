#include "server/sources/source_lister.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/sources/source_description.h"
#include "sources/listing/hub_listing.h"
#include "sources/listing/listing_paths.h"
#include "sources/listing/s3_listing.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::StatusOr<std::unique_ptr<SourceLister>> SourceLister::Create(Options options) {
  return std::unique_ptr<SourceLister>(new SourceLister(std::move(options)));
}

std::unique_ptr<SourceLister> SourceLister::None() {
  return std::unique_ptr<SourceLister>(new SourceLister(Options{}));
}

absl::Status SourceLister::Check(const pb::CheckpointSource& source,
                                 const SourceAllowList& namespace_sources) const {
  RETURN_IF_ERROR(ValidateSource(source));
  RETURN_IF_ERROR(options_.allowed.Check(source, "the server's --allow-source"));
  if (!namespace_sources.empty()) {
    RETURN_IF_ERROR(
        namespace_sources.Check(source, "the namespace's sources (namespaces set --allow-source)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<listing::SourceListing> SourceLister::List(
    const pb::CheckpointSource& source, const std::set<int64_t>& skip_steps) const {
  RETURN_IF_ERROR(ValidateSource(source));
  listing::StepSelection selection;
  selection.names.assign(source.revisions().begin(), source.revisions().end());
  selection.glob = source.glob();
  switch (source.kind_case()) {
    case pb::CheckpointSource::kHub: {
      if (options_.clients.hub == nullptr) {
        return absl::FailedPreconditionError("this server reads no Hub source (no Hub client)");
      }
      listing::HubListingOptions hub;
      hub.endpoint = options_.endpoints.hub_endpoint;
      hub.selection = std::move(selection);
      hub.skip_steps = skip_steps;
      hub.bounds = options_.bounds;
      return listing::ListHubBranches(*options_.clients.hub, source.hub(), hub);
    }
    case pb::CheckpointSource::kHubRepos: {
      if (options_.clients.hub == nullptr) {
        return absl::FailedPreconditionError("this server reads no Hub source (no Hub client)");
      }
      listing::HubSuiteOptions suite;
      suite.endpoint = options_.endpoints.hub_endpoint;
      suite.values = std::move(selection.names);
      if (!source.revision().empty()) suite.revision = source.revision();
      suite.glob = source.glob();
      suite.skip_steps = skip_steps;
      suite.bounds = options_.bounds;
      return listing::ListHubSuite(*options_.clients.hub, source.hub_repos(), suite);
    }
    case pb::CheckpointSource::kS3: {
      if (options_.clients.s3 == nullptr) {
        return absl::FailedPreconditionError("this server reads no S3 source (no S3 client)");
      }
      ASSIGN_OR_RETURN(const listing::S3Location location, listing::ParseS3Url(source.s3()));
      listing::S3ListingOptions s3;
      s3.endpoint = options_.endpoints.s3_endpoint;
      s3.selection = std::move(selection);
      s3.skip_steps = skip_steps;
      s3.bounds = options_.bounds;
      return listing::ListS3Prefix(*options_.clients.s3, location, s3);
    }
    case pb::CheckpointSource::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("source: set one of hub, hub_repos and s3");
}

std::string SourceLister::Describe(const pb::CheckpointSource& source) {
  return DescribeSource(source);
}

pb::SourceKind SourceLister::KindOf(const pb::CheckpointSource& source) {
  return source.kind_case() == pb::CheckpointSource::kS3 ? pb::SOURCE_KIND_S3 : pb::SOURCE_KIND_HUB;
}

}  // namespace anisoscope::server
