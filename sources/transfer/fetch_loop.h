// The attempts of one call and the redirect hops within each: what HttpClient::Get and
// DownloadToFile share. Decides which failures to retry (retry_policy.h), waits the backoff,
// follows redirects itself and attaches credentials only to hops to their origin. Blocks
// until the call ends or its cancel flag is seen (CurlExchange::kCancelPoll).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sources/transfer/curl_exchange.h"
#include "sources/transfer/response_headers.h"
#include "sources/transfer/transfer_options.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::transfer {

struct FetchSpec {
  std::string url;
  bool head = false;
  bool follow_redirects = true;
  std::vector<std::string> headers;  // extra fields, already checked
  // Read before each attempt and hop, during each exchange and through the backoff pause;
  // once true the call ends with CANCELLED, never retried. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

// The answer that ended the call: a 2xx (its body is in the sink), or a 3xx when not
// following redirects.
struct FetchAnswer {
  int status = 0;
  ResponseHeaders headers;
  std::string url;  // that answered
};

// `credentials_origin` is where `credentials` may go (nullopt: nowhere). `counters` gets
// this call's attempts, retries, redirects and bytes, whatever the outcome.
absl::StatusOr<FetchAnswer> FetchWithRetries(const TransferOptions& options,
                                             const Credentials& credentials,
                                             const std::optional<UrlOrigin>& credentials_origin,
                                             const FetchSpec& spec, BodySink* sink,
                                             TransferCounters* counters);

}  // namespace anisoscope::transfer
