// HTTP(S) fetches for the Hub and S3 clients, on libcurl: small bodies (listings) into
// memory under a bound, large ones (weights) streamed to a file under the listing's size and
// sha256, with retries, resume, timeouts and credentials that never leave their origin.
//
// Every call blocks until it succeeds, fails for good or is cancelled (its request's cancel
// flag). HttpClient is thread-safe: each call has its own libcurl handle, and counters()
// adds up all of them.
//
// Redirects are followed here, not by libcurl: the credentials (Credentials) go only to
// requests for their endpoint's origin, so a Hub download redirected to a CDN's signed URL
// reaches the CDN without the token; an https URL never redirects to http.
//
// Errors name the method and URL (without its query, which may hold a signature) and what
// went wrong; an HTTP status keeps its meaning (http_error.h: 401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 NOT_FOUND, the Hub's X-Error-Code named and attached); a timeout
// names the option that bounded it (DEADLINE_EXCEEDED); a size or hash that disagrees names
// both values (DATA_LOSS); attempts spent name max_attempts; a cancelled call is CANCELLED.
// No body and no secret is ever quoted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sources/transfer/download_progress.h"
#include "sources/transfer/response_headers.h"
#include "sources/transfer/transfer_options.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::transfer {

struct GetRequest {
  std::string url;
  // The body is refused (RESOURCE_EXHAUSTED) past this many bytes.
  int64_t max_body_bytes = 16 << 20;
  // Extra fields, "Name: value" (e.g. "Accept: application/json"). Authorization, Cookie and
  // Host are refused: secrets go in Credentials, which keeps them to their origin.
  std::vector<std::string> headers;
  // HEAD: the answer's fields, no body.
  bool head = false;
  // False: a 3xx is the answer (its Location and fields, e.g. the Hub's X-Linked-Etag on the
  // redirect of an LFS file), not followed.
  bool follow_redirects = true;
  // May be null. Set from any thread to abandon the call: it is read before each attempt,
  // at least every ~100 ms (CurlExchange::kCancelPoll) while a request is in flight, at
  // every body write and through the pause before a retry. The call then returns promptly
  // with CANCELLED naming the URL (without its query), and is never retried. Borrowed: it
  // must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;           // 2xx, or 3xx when not following redirects
  ResponseHeaders headers;  // of that answer: Link, ETag, X-Repo-Commit, Content-Range, ...
  std::string body;
  // The URL that answered (after redirects). It may carry a signature: not for logs.
  std::string url;
};

struct DownloadRequest {
  std::string url;
  // Written in place (created, or truncated unless resume_existing_file). The caller gives a
  // unique ".incomplete" name and renames it once this returns OK; the data is not fsync'd.
  std::string path;
  // Hard bound: a body that would take the file past it is cut and refused, a shorter one
  // is an error (both DATA_LOSS). nullopt: any size.
  std::optional<int64_t> expected_size;
  // 64 hex digits; checked over the whole file as it streams. Empty: not checked.
  std::string expected_sha256;
  // Continue a file a previous run left at `path` ("Range: bytes=N-"), hashing its bytes
  // first; a file longer than expected_size starts over.
  bool resume_existing_file = false;
  // On failure the file is removed, unless this is set (to resume it later).
  bool keep_partial_file = false;
  std::vector<std::string> headers;  // as GetRequest::headers
  // Called on this thread at most every TransferOptions::progress_interval, and once at the
  // end; must not block.
  std::function<void(const DownloadProgress&)> on_progress;
  // As GetRequest::cancel: a cancelled download is CANCELLED, mid-file too, and its file is
  // removed unless keep_partial_file. A flag set before the call sends no request.
  const std::atomic<bool>* cancel = nullptr;
};

struct DownloadResult {
  int64_t bytes = 0;          // the file's size
  std::string sha256;         // of the whole file, hex
  int64_t resumed_from = 0;   // bytes that were on disk already when the call began
  TransferCounters counters;  // of this call
};

class HttpClient {
 public:
  // INVALID_ARGUMENT for options out of range or credentials that cannot be used (naming
  // which, never quoting a secret).
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(TransferOptions options,
                                                            Credentials credentials = {});

  // GET (or HEAD) `request.url`; a 2xx answer (or a 3xx when not following) with its body.
  absl::StatusOr<HttpResponse> Get(const GetRequest& request);

  // GET `request.url` into `request.path`, resuming after a cut, bounded and checked as
  // DownloadRequest says. On failure the file is gone (unless keep_partial_file).
  absl::StatusOr<DownloadResult> DownloadToFile(const DownloadRequest& request);

  // Sums over every call so far.
  TransferCounters counters() const;

 private:
  HttpClient(TransferOptions options, Credentials credentials,
             std::optional<UrlOrigin> credentials_origin);
  void Count(const TransferCounters& call);

  const TransferOptions options_;
  const Credentials credentials_;
  // Where credentials_ may be sent; nullopt when there are none.
  const std::optional<UrlOrigin> credentials_origin_;
  std::atomic<int64_t> attempts_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> redirects_{0};
  std::atomic<int64_t> bytes_fetched_{0};
};

}  // namespace anisoscope::transfer
