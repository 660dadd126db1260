// The names the source cache puts on disk, each checked before it touches the disk: a repo's
// folder, a snapshot's name, a blob's name (an etag), a file's path inside a step, and the
// relative link from a snapshot entry to its blob.
//
// Hub repos follow huggingface_hub's cache layout (file_download.py): `repo_folder_name`
// gives `models--ORG--NAME`, blobs are `blobs/<etag>`, snapshot entries are relative links
// made by `_create_symlink` (os.path.relpath from the entry's folder to the blob), and a
// revision's commit is kept in `refs/<revision>` by `_cache_commit_hash_for_specific_revision`.
// S3 buckets get the same shape under `s3--BUCKET` (see source_cache.h).
//
// Names come from listings a stranger wrote, so every check refuses rather than repairs:
// INVALID_ARGUMENT naming the repo, the step and the offending name. Pure functions;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::cache {

// A repository (Hub model) or a bucket (S3), as the cache names its folder.
struct CacheRepo {
  std::string folder;   // "models--ORG--NAME" or "s3--BUCKET": one path segment
  std::string display;  // "hub:ORG/NAME" or "s3://BUCKET", for errors
};

// A Hub model repo id, "ORG/NAME" or a legacy "NAME" (as huggingface_hub's
// validate_repo_id: letters, digits, '-', '_', '.', no "--" or "..", at most 96 characters).
absl::StatusOr<CacheRepo> HubModelRepo(absl::string_view repo_id);
// An S3 bucket name (3-63 characters of lowercase letters, digits, '-' and '.').
absl::StatusOr<CacheRepo> S3BucketRepo(absl::string_view bucket);

// True for a 40-digit lowercase hex commit (huggingface_hub's REGEX_COMMIT_HASH).
bool IsCommitHash(absl::string_view name);
// The snapshot name of one step folder under an S3 prefix ("runs/a/step100/"): the key prefix
// without its trailing '/', with every byte outside [A-Za-z0-9._-] (the '/' included) and a
// leading '.' percent-encoded, so that distinct prefixes never share a snapshot.
std::string S3SnapshotName(absl::string_view step_prefix);

// An ETag as a blob name: W/ and quotes dropped (huggingface_hub's _normalize_etag).
std::string NormalizeEtag(absl::string_view etag);

// The segments of `path`, a '/'-separated file name from a listing, refused (INVALID_ARGUMENT
// "`where`: file name 'NAME' ...") when empty, absolute, with an empty, '.' or '..' segment,
// a backslash, a NUL or another control character, a segment over 255 bytes, or a segment
// that ends in ".incomplete" (the cache's own partial files).
absl::StatusOr<std::vector<std::string>> FileSegments(absl::string_view path,
                                                      absl::string_view where);
// A snapshot name: one segment of [A-Za-z0-9._%-], not "." or "..", at most 255 bytes.
absl::Status CheckSnapshotName(absl::string_view name, absl::string_view where);
// A revision as a refs/ path ("main", "refs/pr/1"): FileSegments' rules.
absl::Status CheckRevision(absl::string_view revision, absl::string_view where);
// A (normalized) etag as a blob name: 1-128 characters of [A-Za-z0-9_-].
absl::Status CheckEtag(absl::string_view etag, absl::string_view where);

// The link a snapshot entry of `depth` folders below the snapshot holds to blob `etag`:
// "../../blobs/ETAG" with one more "../" per folder, as _create_symlink's relpath gives.
std::string BlobLinkTarget(size_t depth, absl::string_view etag);

}  // namespace anisoscope::cache
