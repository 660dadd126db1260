// The dashboard's files: which file under the web folder a URL path names (never one outside
// it), its Content-Type, and the handler that sends it. ContentTypeFor and ResolveStaticFile
// only look at the file system (no state, thread-safe); ServeStaticFile reads the whole file
// on the calling (httplib) thread.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace anisoscope::server {

// The Content-Type of a file by its extension (html, js, mjs, css, svg, png, json, map,
// ...); application/octet-stream when unknown.
std::string ContentTypeFor(const std::filesystem::path& file);
// The file under `web_dir` that URL path `url_path` (already percent-decoded) names:
// index.html for "/" and for directories. INVALID_ARGUMENT for a ".." segment, a backslash
// or a NUL; NOT_FOUND when there is no such file; PERMISSION_DENIED when it resolves
// (through symlinks) outside `web_dir`; UNAVAILABLE when `web_dir` does not exist.
absl::StatusOr<std::filesystem::path> ResolveStaticFile(const std::filesystem::path& web_dir,
                                                        const std::string& url_path);

// Answers `req` with the file ResolveStaticFile names for its path ("Cache-Control:
// no-cache"), or with the HTTP status of its error (http_json.h's HttpStatusFor) and the
// message as text/plain; 500 when the file cannot be read.
void ServeStaticFile(const std::filesystem::path& web_dir, const httplib::Request& req,
                     httplib::Response& res);

}  // namespace anisoscope::server
