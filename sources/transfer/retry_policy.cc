#include "sources/transfer/retry_policy.h"

#include <algorithm>
#include <random>

namespace anisoscope::transfer {

bool IsRetryableHttpStatus(int http_status) {
  if (http_status == 408 || http_status == 429) return true;
  return http_status >= 500 && http_status <= 599 && http_status != 501 && http_status != 505;
}

bool IsRetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

absl::Duration BackoffBeforeRetry(const TransferOptions& options, int retry,
                                  absl::Duration retry_after) {
  absl::Duration ceiling = options.initial_backoff;
  for (int i = 1; i < retry && ceiling < options.max_backoff; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, options.max_backoff);
  thread_local std::minstd_rand random(std::random_device{}());
  std::uniform_real_distribution<double> share(0.5, 1.0);
  const absl::Duration backoff = ceiling * share(random);
  return std::max(backoff, std::min(retry_after, options.max_retry_after));
}

}  // namespace anisoscope::transfer
