// The names in a listing a stranger wrote, checked before anything uses them, and the URL
// pieces built from them. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace anisoscope::listing {

// OK when `path` is a safe relative file name: not empty, not absolute, no empty, '.' or
// '..' segment, no backslash, NUL or other control byte (the cache's FileSegments rules).
// INVALID_ARGUMENT "`where`: file name ... " otherwise (the name escaped, never the file).
absl::Status CheckListedPath(absl::string_view path, absl::string_view where);

// Each byte outside RFC 3986's unreserved set (A-Z a-z 0-9 - . _ ~) as %XX; with
// `keep_slash`, '/' stays (a path of segments).
std::string PercentEncode(absl::string_view text, bool keep_slash);

// The URL prefix of a Hub step's files, `{endpoint}/{repo}/resolve/{commit}/`: a file's URL
// is this plus PercentEncode(path, /*keep_slash=*/true). `endpoint` has no trailing '/';
// `repo` and `commit` are checked by the caller (cache::HubModelRepo, cache::IsCommitHash).
std::string HubFileUrlPrefix(absl::string_view endpoint, absl::string_view repo,
                             absl::string_view commit);

// The URL prefix of an S3 step's files (path-style), `{endpoint}/{bucket}/{folder}` with the
// bucket and the folder's key prefix ("runs/step100/", ending in '/') percent-encoded.
std::string S3FileUrlPrefix(absl::string_view endpoint, absl::string_view bucket,
                            absl::string_view folder);

// `name` as fnmatch(3) matches it against `glob` ('*', '?', '[...]'; '/' is a plain byte).
bool MatchesGlob(absl::string_view glob, absl::string_view name);

// The target of the `rel="next"` link of an HTTP Link field (RFC 8288), e.g.
// `<https://h/api/...&cursor=x>; rel="next"`; nullopt when none.
std::optional<std::string> NextLink(const std::vector<std::string>& link_fields);

}  // namespace anisoscope::listing
