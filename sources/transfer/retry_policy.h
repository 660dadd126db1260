// Which failed attempts are worth another, and how long to wait before it: exponential
// backoff with jitter, never shorter than the server's Retry-After (within a bound).
#pragma once

#include <curl/curl.h>

#include "absl/time/time.h"
#include "sources/transfer/transfer_options.h"

namespace anisoscope::transfer {

// 408, 429 and the 5xx that mean "not now" (500, 502, 503, 504 and the rest but 501 and 505).
bool IsRetryableHttpStatus(int http_status);

// A transfer that failed on the way: no connection, a reset, a cut body, a timeout.
bool IsRetryableCurlCode(CURLcode code);

// The pause before retry number `retry` (1 for the first): initial_backoff doubled per
// retry, capped at max_backoff, drawn from [half, all] of it; at least `retry_after` (the
// server's, zero when it sent none) capped at max_retry_after. Thread-safe.
absl::Duration BackoffBeforeRetry(const TransferOptions& options, int retry,
                                  absl::Duration retry_after);

}  // namespace anisoscope::transfer
