#include "sources/endpoints/remote_checkpoint.h"

#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "sources/cache/cache_names.h"
#include "sources/listing/listing_paths.h"

namespace anisoscope::sources {
namespace {

constexpr char kMessage[] = "RemoteCheckpoint";

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kMessage, ".", field, ": ", what));
}

bool IsSha256(absl::string_view text) {
  if (text.size() != 64) return false;
  for (const char c : text) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

// The kind, or INVALID_ARGUMENT for one no case names.
absl::StatusOr<bool> IsHub(v1::SourceKind kind) {
  switch (kind) {
    case v1::SOURCE_KIND_HUB:
      return true;
    case v1::SOURCE_KIND_S3:
      return false;
    case v1::SOURCE_KIND_UNSPECIFIED:
    case v1::SourceKind_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::SourceKind_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return Invalid("kind", absl::StrCat("must be SOURCE_KIND_HUB or SOURCE_KIND_S3, not ",
                                      static_cast<int>(kind)));
}

}  // namespace

v1::RemoteCheckpoint ToRemoteCheckpoint(const listing::RemoteStep& step, v1::SourceKind kind) {
  v1::RemoteCheckpoint out;
  out.set_kind(kind);
  out.set_repo(step.repo);
  out.set_name(step.name);
  out.set_revision(step.revision);
  out.set_commit(step.commit);
  for (const listing::RemoteFile& file : step.files) {
    v1::RemoteFile* wire = out.add_files();
    wire->set_path(file.path);
    wire->set_size(file.size);
    wire->set_sha256(file.sha256);
    wire->set_etag(file.etag);
  }
  return out;
}

absl::StatusOr<listing::RemoteStep> FromRemoteCheckpoint(const v1::RemoteCheckpoint& remote,
                                                         int64_t step,
                                                         const SourceEndpoints& endpoints) {
  ASSIGN_OR_RETURN(const bool hub, IsHub(remote.kind()));
  listing::RemoteStep out;
  out.step = step;
  out.repo = remote.repo();
  out.revision = remote.revision();
  out.commit = remote.commit();
  out.name = remote.name().empty() ? remote.revision() : remote.name();
  std::string url_prefix;
  if (hub) {
    const absl::StatusOr<cache::CacheRepo> repo = cache::HubModelRepo(remote.repo());
    if (!repo.ok()) return Invalid("repo", repo.status().message());
    if (!cache::IsCommitHash(remote.commit())) {
      return Invalid("commit", absl::StrCat("'", absl::CHexEscape(remote.commit()),
                                            "' is not a 40-digit lowercase hex commit"));
    }
    if (!remote.revision().empty()) {
      const absl::Status revision = cache::CheckRevision(remote.revision(), repo->display);
      if (!revision.ok()) return Invalid("revision", revision.message());
    }
    url_prefix = listing::HubFileUrlPrefix(endpoints.hub_endpoint, remote.repo(), remote.commit());
  } else {
    const absl::StatusOr<cache::CacheRepo> bucket = cache::S3BucketRepo(remote.repo());
    if (!bucket.ok()) return Invalid("repo", bucket.status().message());
    if (!remote.commit().empty()) return Invalid("commit", "must be empty for S3");
    absl::string_view folder = remote.revision();
    if (!absl::ConsumeSuffix(&folder, "/")) {
      return Invalid("revision", absl::StrCat("'", absl::CHexEscape(remote.revision()),
                                              "' is not a folder's key prefix ending in '/'"));
    }
    const absl::Status checked = listing::CheckListedPath(folder, bucket->display);
    if (!checked.ok()) return Invalid("revision", checked.message());
    url_prefix = listing::S3FileUrlPrefix(endpoints.s3_endpoint, remote.repo(), remote.revision());
  }
  if (remote.files_size() == 0) return Invalid("files", "no files");
  if (remote.files_size() > kMaxRemoteCheckpointFiles) {
    return Invalid("files", absl::StrCat("more than ", kMaxRemoteCheckpointFiles, " files"));
  }
  std::set<std::string> paths;
  for (int i = 0; i < remote.files_size(); ++i) {
    const v1::RemoteFile& file = remote.files(i);
    const std::string field = absl::StrCat("files[", i, "]");
    const absl::Status path = listing::CheckListedPath(file.path(), out.repo);
    if (!path.ok()) return Invalid(absl::StrCat(field, ".path"), path.message());
    if (!paths.insert(file.path()).second) {
      return Invalid(absl::StrCat(field, ".path"),
                     absl::StrCat("'", absl::CHexEscape(file.path()), "' is listed twice"));
    }
    if (!file.sha256().empty() && !IsSha256(file.sha256())) {
      return Invalid(absl::StrCat(field, ".sha256"), "is not 64 lowercase hex digits");
    }
    const absl::Status etag = cache::CheckEtag(cache::NormalizeEtag(file.etag()), out.repo);
    if (!etag.ok()) return Invalid(absl::StrCat(field, ".etag"), etag.message());
    listing::RemoteFile converted;
    converted.path = file.path();
    converted.size = file.size();
    converted.sha256 = file.sha256();
    converted.etag = file.etag();
    converted.url =
        absl::StrCat(url_prefix, listing::PercentEncode(file.path(), /*keep_slash=*/true));
    out.files.push_back(std::move(converted));
  }
  return out;
}

std::string DescribeRemoteCheckpoint(const v1::RemoteCheckpoint& remote) {
  if (remote.kind() == v1::SOURCE_KIND_S3) {
    return absl::StrCat("s3://", absl::CHexEscape(remote.repo()), "/",
                        absl::CHexEscape(remote.revision()));
  }
  return absl::StrCat(
      "hub:", absl::CHexEscape(remote.repo()), "@",
      absl::CHexEscape(remote.revision().empty() ? remote.commit() : remote.revision()));
}

}  // namespace anisoscope::sources
