// The absl::Status an HTTP answer that is not a success becomes, and what a caller can read
// back from it. A message names the request (method and URL without its query) and what went
// wrong, never a body, a header value other than the Hub's X-Error-Code, or a secret.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace anisoscope::transfer {

// The reason phrase of an HTTP status ("Not Found"); "" for one this table lacks.
absl::string_view ReasonPhrase(int http_status);

// The Status for answer `http_status` to `method` `url`: 401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 and 410 NOT_FOUND, 416 OUT_OF_RANGE, 429 RESOURCE_EXHAUSTED, 5xx
// UNAVAILABLE, 3xx and other 4xx FAILED_PRECONDITION; a GatedRepo code is PERMISSION_DENIED
// whatever its status. `hub_error_code` (the Hub's X-Error-Code: GatedRepo, RepoNotFound,
// RevisionNotFound, EntryNotFound, ...) is named in the message, kept to a short token, and
// attached as a payload, as is the status. `after` says why no more tries were made ("after
// 6 attempts (max_attempts)"), or is empty.
absl::Status HttpStatusError(absl::string_view method, absl::string_view url, int http_status,
                             absl::string_view hub_error_code, absl::string_view after = "");

// The HTTP status a Status from HttpStatusError carries; nullopt for any other Status.
std::optional<int> HttpStatusOf(const absl::Status& status);
// The X-Error-Code a Status from HttpStatusError carries; nullopt when the answer had none.
std::optional<std::string> HubErrorCodeOf(const absl::Status& status);

// `code` kept to at most 64 letters, digits, '-', '_' and '.': a header value a server
// wrote, shown in messages only in this form.
std::string SanitizedErrorCode(absl::string_view code);

}  // namespace anisoscope::transfer
