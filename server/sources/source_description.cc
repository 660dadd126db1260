#include "server/sources/source_description.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/s3_listing.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

namespace {

absl::Status Bad(absl::string_view field, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, " \"", absl::CHexEscape(value.substr(0, kMaxSourceNameLength)), "\" ", why));
}

// ORG/NAME with both parts present (a legacy "NAME" has no org for --allow-source to match).
absl::Status CheckRepoId(absl::string_view field, absl::string_view repo) {
  if (!absl::StrContains(repo, '/')) return Bad(field, repo, "is not ORG/NAME");
  absl::Status status = cache::HubModelRepo(repo).status();
  if (!status.ok()) return Bad(field, repo, "is not ORG/NAME of letters, digits, '-', '_', '.'");
  return absl::OkStatus();
}

absl::Status CheckName(absl::string_view field, absl::string_view name) {
  if (name.empty() || name.size() > static_cast<size_t>(kMaxSourceNameLength)) {
    return Bad(field, name, absl::StrCat("must be 1 to ", kMaxSourceNameLength, " characters"));
  }
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Bad(field, name, "holds a control character");
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool HasSource(const pb::CheckpointSource& source) {
  return source.kind_case() != pb::CheckpointSource::KIND_NOT_SET;
}

absl::Status ValidateSource(const pb::CheckpointSource& source) {
  switch (source.kind_case()) {
    case pb::CheckpointSource::kHub:
      RETURN_IF_ERROR(CheckRepoId("source.hub", source.hub()));
      break;
    case pb::CheckpointSource::kHubRepos: {
      const std::string& pattern = source.hub_repos();
      const size_t at = pattern.find("{}");
      if (at == std::string::npos || pattern.find("{}", at + 2) != std::string::npos ||
          pattern.find('/') == std::string::npos || pattern.find('/') > at) {
        return Bad("source.hub_repos", pattern, "is not ORG/NAME with one \"{}\" in NAME");
      }
      RETURN_IF_ERROR(CheckRepoId("source.hub_repos", absl::StrReplaceAll(pattern, {{"{}", "0"}})));
      break;
    }
    case pb::CheckpointSource::kS3: {
      absl::Status status = listing::ParseS3Url(source.s3()).status();
      if (!status.ok()) {
        return Bad("source.s3", source.s3(),
                   absl::StrCat("is not s3://BUCKET/PREFIX/: ", status.message()));
      }
      break;
    }
    case pb::CheckpointSource::KIND_NOT_SET:
      return absl::InvalidArgumentError("source: set one of hub, hub_repos and s3");
  }
  if (source.revisions_size() > kMaxSourceRevisions) {
    return absl::InvalidArgumentError(absl::StrCat("source.revisions: ", source.revisions_size(),
                                                   " given, at most ", kMaxSourceRevisions));
  }
  for (const std::string& revision : source.revisions()) {
    RETURN_IF_ERROR(CheckName("source.revisions", revision));
  }
  if (!source.glob().empty()) RETURN_IF_ERROR(CheckName("source.glob", source.glob()));
  if (!source.revision().empty()) {
    if (source.kind_case() != pb::CheckpointSource::kHubRepos) {
      return Bad("source.revision", source.revision(),
                 "is for hub_repos only (use source.revisions for hub and s3)");
    }
    RETURN_IF_ERROR(CheckName("source.revision", source.revision()));
    // The worker files each repo's step under refs/<revision> in its cache: refused here, at
    // submit, rather than by every step's worker.
    RETURN_IF_ERROR(cache::CheckRevision(source.revision(), "source.revision"));
  }
  return absl::OkStatus();
}

std::string DescribeSource(const pb::CheckpointSource& source) {
  switch (source.kind_case()) {
    case pb::CheckpointSource::kHub:
      return absl::StrCat("hub:", source.hub());
    case pb::CheckpointSource::kHubRepos:
      return absl::StrCat("hub:", source.hub_repos());
    case pb::CheckpointSource::kS3:
      return source.s3();
    case pb::CheckpointSource::KIND_NOT_SET:
      break;
  }
  return "";
}

std::string StepOriginSource(const pb::RemoteCheckpoint& remote) {
  if (remote.kind() == pb::SOURCE_KIND_S3) return absl::StrCat("s3://", remote.repo());
  return absl::StrCat("hub:", remote.repo());
}

}  // namespace anisoscope::server
