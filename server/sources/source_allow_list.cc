#include "server/sources/source_allow_list.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "server/sources/source_description.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/s3_listing.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

namespace {

absl::Status BadEntry(absl::string_view flag, absl::string_view entry, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " \"", absl::CHexEscape(entry), "\" ", why));
}

// The org of "ORG/NAME" (or of a pattern): what precedes the first '/'.
absl::string_view OrgOf(absl::string_view repo) { return repo.substr(0, repo.find('/')); }

}  // namespace

absl::StatusOr<SourceAllowList> SourceAllowList::Parse(const std::vector<std::string>& entries,
                                                       absl::string_view flag) {
  SourceAllowList list;
  for (const std::string& given : entries) {
    Entry entry;
    std::string normal = given;
    absl::string_view rest = given;
    if (absl::ConsumePrefix(&rest, "hub:")) {
      if (absl::ConsumeSuffix(&rest, "/*")) {
        entry.kind = Entry::Kind::kHubOrg;
        if (rest.empty() || absl::StrContains(rest, '/') ||
            !cache::HubModelRepo(absl::StrCat(rest, "/x")).ok()) {
          return BadEntry(flag, given, "is not hub:ORG/* (ORG of letters, digits, '-', '_', '.')");
        }
      } else {
        entry.kind = Entry::Kind::kHubRepo;
        // A --hub-repos pattern may be allowed as written ("hub:ORG/NAME{}").
        const std::string plain = absl::StrReplaceAll(rest, {{"{}", "0"}});
        if (!absl::StrContains(rest, '/') || !cache::HubModelRepo(plain).ok()) {
          return BadEntry(flag, given, "is not hub:ORG/NAME or hub:ORG/*");
        }
      }
      entry.repo = std::string(rest);
    } else if (absl::StartsWith(given, "s3://")) {
      if (!absl::StrContains(absl::string_view(given).substr(5), '/')) normal += "/";
      absl::StatusOr<listing::S3Location> location = listing::ParseS3Url(normal);
      if (!location.ok()) {
        return BadEntry(flag, given,
                        absl::StrCat("is not s3://BUCKET/PREFIX/: ", location.status().message()));
      }
      entry.kind = Entry::Kind::kS3;
      entry.repo = location->bucket;
      entry.prefix = location->prefix;
    } else {
      return BadEntry(flag, given, "is neither hub:ORG/NAME, hub:ORG/* nor s3://BUCKET/PREFIX/");
    }
    list.entries_.push_back(std::move(normal));
    list.parsed_.push_back(std::move(entry));
  }
  return list;
}

bool SourceAllowList::Allows(const pb::CheckpointSource& source) const {
  absl::StatusOr<listing::S3Location> location;
  if (source.kind_case() == pb::CheckpointSource::kS3) {
    location = listing::ParseS3Url(source.s3());
    if (!location.ok()) return false;
  }
  for (const Entry& entry : parsed_) {
    switch (source.kind_case()) {
      case pb::CheckpointSource::kHub:
        if (entry.kind == Entry::Kind::kHubRepo && entry.repo == source.hub()) return true;
        if (entry.kind == Entry::Kind::kHubOrg && entry.repo == OrgOf(source.hub())) return true;
        break;
      case pb::CheckpointSource::kHubRepos:
        // Every repo the pattern can name lies under ORG/*, or the pattern is the entry.
        if (entry.kind == Entry::Kind::kHubRepo && entry.repo == source.hub_repos()) return true;
        if (entry.kind == Entry::Kind::kHubOrg && entry.repo == OrgOf(source.hub_repos())) {
          return true;
        }
        break;
      case pb::CheckpointSource::kS3:
        // Both prefixes are "" or end in '/', so a string prefix is a prefix of whole segments.
        if (entry.kind == Entry::Kind::kS3 && entry.repo == location->bucket &&
            absl::StartsWith(location->prefix, entry.prefix)) {
          return true;
        }
        break;
      case pb::CheckpointSource::KIND_NOT_SET:
        return false;
    }
  }
  return false;
}

absl::Status SourceAllowList::Check(const pb::CheckpointSource& source,
                                    absl::string_view flag) const {
  if (Allows(source)) return absl::OkStatus();
  const std::string described = absl::CHexEscape(DescribeSource(source));
  if (parsed_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("source ", described, " is not allowed: no ",
                                                    flag, " is set, so only folders are read"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("source ", described, " is not allowed by ", flag));
}

}  // namespace anisoscope::server
