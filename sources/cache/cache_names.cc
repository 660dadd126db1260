#include "sources/cache/cache_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anisoscope::cache {
namespace {

constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX on Linux file systems
constexpr size_t kMaxEtagBytes = 128;

bool IsRepoIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

bool IsPlainChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

absl::Status BadName(absl::string_view where, absl::string_view what, absl::string_view name,
                     absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", what, " '", absl::CHexEscape(name), "' ", why));
}

}  // namespace

absl::StatusOr<CacheRepo> HubModelRepo(absl::string_view repo_id) {
  const std::vector<absl::string_view> parts = absl::StrSplit(repo_id, '/');
  const bool shape_ok = !repo_id.empty() && repo_id.size() <= 96 && parts.size() <= 2 &&
                        !absl::StrContains(repo_id, "--") && !absl::StrContains(repo_id, "..");
  bool chars_ok = shape_ok;
  for (absl::string_view part : parts) {
    if (part.empty() || part.front() == '-' || part.front() == '.' || part.back() == '-' ||
        part.back() == '.') {
      chars_ok = false;
    }
    for (char c : part) chars_ok = chars_ok && IsRepoIdChar(c);
  }
  if (!chars_ok) {
    return BadName("hub", "repo id", repo_id,
                   "is not ORG/NAME of letters, digits, '-', '_' and '.' (no '--' or '..')");
  }
  CacheRepo repo;
  repo.folder = "models";
  for (absl::string_view part : parts) absl::StrAppend(&repo.folder, "--", part);
  repo.display = absl::StrCat("hub:", repo_id);
  return repo;
}

absl::StatusOr<CacheRepo> S3BucketRepo(absl::string_view bucket) {
  bool ok = bucket.size() >= 3 && bucket.size() <= 63 && bucket.front() != '.' &&
            bucket.front() != '-' && !absl::StrContains(bucket, "..");
  for (char c : bucket) {
    ok = ok && (absl::ascii_islower(static_cast<unsigned char>(c)) ||
                absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (!ok) {
    return BadName("s3", "bucket", bucket, "is not 3-63 lowercase letters, digits, '-' and '.'");
  }
  return CacheRepo{absl::StrCat("s3--", bucket), absl::StrCat("s3://", bucket)};
}

bool IsCommitHash(absl::string_view name) {
  if (name.size() != 40) return false;
  for (char c : name) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) {
      return false;
    }
  }
  return true;
}

std::string S3SnapshotName(absl::string_view step_prefix) {
  while (!step_prefix.empty() && step_prefix.back() == '/') step_prefix.remove_suffix(1);
  std::string name;
  for (size_t i = 0; i < step_prefix.size(); ++i) {
    const char c = step_prefix[i];
    if (IsPlainChar(c) && !(i == 0 && c == '.')) {
      name.push_back(c);
    } else {
      constexpr char kDigits[] = "0123456789ABCDEF";
      const unsigned char byte = static_cast<unsigned char>(c);
      name += {'%', kDigits[byte >> 4], kDigits[byte & 15]};
    }
  }
  return name;
}

std::string NormalizeEtag(absl::string_view etag) {
  if (absl::StartsWith(etag, "W/")) etag.remove_prefix(2);
  while (!etag.empty() && etag.front() == '"') etag.remove_prefix(1);
  while (!etag.empty() && etag.back() == '"') etag.remove_suffix(1);
  return std::string(etag);
}

absl::StatusOr<std::vector<std::string>> FileSegments(absl::string_view path,
                                                      absl::string_view where) {
  if (path.empty()) return BadName(where, "file name", path, "is empty");
  if (path.front() == '/') return BadName(where, "file name", path, "is an absolute path");
  for (char c : path) {
    if (c == '\\') return BadName(where, "file name", path, "holds a backslash");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return BadName(where, "file name", path, "holds a NUL or control character");
    }
  }
  std::vector<std::string> segments = absl::StrSplit(path, '/');
  for (const std::string& segment : segments) {
    if (segment.empty()) return BadName(where, "file name", path, "has an empty segment");
    if (segment == "." || segment == "..") {
      return BadName(where, "file name", path, "has a '.' or '..' segment");
    }
    if (segment.size() > kMaxSegmentBytes) {
      return BadName(where, "file name", path, "has a segment over 255 bytes");
    }
    if (absl::EndsWith(segment, ".incomplete")) {
      return BadName(where, "file name", path, "ends in '.incomplete', the cache's partial files");
    }
  }
  return segments;
}

absl::Status CheckSnapshotName(absl::string_view name, absl::string_view where) {
  bool ok = !name.empty() && name.size() <= kMaxSegmentBytes && name != "." && name != "..";
  for (char c : name) ok = ok && (IsPlainChar(c) || c == '%');
  if (!ok) {
    return BadName(where, "snapshot", name, "is not one segment of [A-Za-z0-9._%-]");
  }
  return absl::OkStatus();
}

absl::Status CheckRevision(absl::string_view revision, absl::string_view where) {
  absl::StatusOr<std::vector<std::string>> segments = FileSegments(revision, where);
  if (!segments.ok()) {
    return BadName(where, "revision", revision, "is not a safe refs/ name");
  }
  return absl::OkStatus();
}

absl::Status CheckEtag(absl::string_view etag, absl::string_view where) {
  bool ok = !etag.empty() && etag.size() <= kMaxEtagBytes;
  for (char c : etag) {
    ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
  }
  if (!ok) return BadName(where, "etag", etag, "is not 1-128 characters of [A-Za-z0-9_-]");
  return absl::OkStatus();
}

std::string BlobLinkTarget(size_t depth, absl::string_view etag) {
  std::string target;
  for (size_t i = 0; i < depth + 2; ++i) target += "../";
  return absl::StrCat(target, "blobs/", etag);
}

}  // namespace anisoscope::cache
