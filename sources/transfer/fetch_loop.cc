#include "sources/transfer/fetch_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sources/transfer/http_error.h"
#include "sources/transfer/retry_policy.h"
#include "sources/transfer/sigv4_canonical_url.h"

namespace anisoscope::transfer {
namespace {

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// "GET https://host/path", or "GET https://host/path (redirected to https://cdn/path)".
std::string Describe(absl::string_view method, absl::string_view url, absl::string_view hop) {
  std::string text = absl::StrCat(method, " ", UrlForMessages(url));
  if (hop != url) absl::StrAppend(&text, " (redirected to ", UrlForMessages(hop), ")");
  return text;
}

// `status` with `prefix` put before its message.
absl::Status WithPrefix(absl::string_view prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// `status` with `suffix` added to its message, payloads kept.
absl::Status WithSuffix(const absl::Status& status, absl::string_view suffix) {
  absl::Status extended(status.code(), absl::StrCat(status.message(), suffix));
  status.ForEachPayload([&](absl::string_view type, const absl::Cord& payload) {
    extended.SetPayload(type, payload);
  });
  return extended;
}

bool IsSet(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

// Sleeps `pause`, in short slices so that a cancel wakes it early; false when cancelled.
bool SleepUnlessCancelled(absl::Duration pause, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  constexpr Clock::duration kSlice = std::chrono::milliseconds(10);
  const Clock::time_point until = Clock::now() + absl::ToChronoNanoseconds(pause);
  for (Clock::time_point now = Clock::now(); now < until; now = Clock::now()) {
    if (IsSet(cancel)) return false;
    std::this_thread::sleep_for(std::min(kSlice, until - now));
  }
  return !IsSet(cancel);
}

absl::Status Cancelled(absl::string_view what) {
  return absl::CancelledError(absl::StrCat(what, ": cancelled"));
}

// The Status of a transfer that failed on the way (no HTTP status to speak of), and whether
// another attempt may do better.
struct Failure {
  absl::Status status;
  bool retryable = false;
  absl::Duration retry_after;
};

Failure TransportFailure(const TransferOptions& options, const std::string& what,
                         const ExchangeOutcome& outcome) {
  if (outcome.stalled) {
    return {absl::DeadlineExceededError(absl::StrCat(what, ": no byte for ",
                                                     absl::FormatDuration(options.stall_timeout),
                                                     " (stall_timeout)")),
            true};
  }
  if (outcome.code == CURLE_OPERATION_TIMEDOUT) {
    return {absl::DeadlineExceededError(absl::StrCat(what, ": no connection within ",
                                                     absl::FormatDuration(options.connect_timeout),
                                                     " (connect_timeout)")),
            true};
  }
  // curl_easy_strerror's fixed text, never the error buffer: nothing a server sent.
  const bool retryable = IsRetryableCurlCode(outcome.code);
  const std::string message =
      absl::StrCat(what, ": ", curl_easy_strerror(outcome.code), " (curl ", outcome.code, ")");
  return {retryable ? absl::UnavailableError(message) : absl::FailedPreconditionError(message),
          retryable};
}

}  // namespace

absl::StatusOr<FetchAnswer> FetchWithRetries(const TransferOptions& options,
                                             const Credentials& credentials,
                                             const std::optional<UrlOrigin>& credentials_origin,
                                             const FetchSpec& spec, BodySink* sink,
                                             TransferCounters* counters) {
  const absl::string_view method = spec.head ? "HEAD" : "GET";
  RETURN_IF_ERROR(OriginOf(spec.url).status());
  ASSIGN_OR_RETURN(std::unique_ptr<CurlExchange> exchange,
                   CurlExchange::Create(options, credentials));
  Failure last;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    if (attempt > 1) {
      const absl::Duration pause = BackoffBeforeRetry(options, attempt - 1, last.retry_after);
      spdlog::warn("{}; attempt {} of {} in {}", std::string(last.status.message()), attempt,
                   options.max_attempts,
                   absl::FormatDuration(absl::Trunc(pause, absl::Milliseconds(1))));
      if (!SleepUnlessCancelled(pause, spec.cancel)) {
        return Cancelled(Describe(method, spec.url, spec.url));
      }
      ++counters->retries;
    }
    std::string url = spec.url;
    for (int hops = 0;; ++hops) {
      if (IsSet(spec.cancel)) return Cancelled(Describe(method, spec.url, url));
      ASSIGN_OR_RETURN(const UrlOrigin origin, OriginOf(url));
      ExchangeRequest request;
      request.head = spec.head;
      request.headers = spec.headers;
      request.range_start = sink != nullptr ? sink->ResumeOffset() : 0;
      request.with_credentials = credentials_origin.has_value() && origin == *credentials_origin;
      request.cancel = spec.cancel;
      request.url = url;
      if (request.with_credentials && credentials.aws.has_value()) {
        ASSIGN_OR_RETURN(request.url, CanonicalUrlForSigV4(url));
      }
      const ExchangeOutcome outcome = exchange->Run(request, sink);
      ++counters->attempts;
      counters->bytes_fetched += outcome.body_bytes;
      const std::string what = Describe(method, spec.url, url);
      // Final, whatever else went wrong on the way: no retry, no pause.
      if (outcome.cancelled) return Cancelled(what);

      if (!outcome.sink_status.ok()) {
        last = {WithPrefix(absl::StrCat(what, ": "), outcome.sink_status),
                outcome.sink_status.code() == absl::StatusCode::kUnavailable};
        if (!last.retryable) return last.status;
        break;
      }
      // An answer whose fields all came is judged by its status, even when its body was cut
      // (an error page read only in part).
      const bool answered =
          outcome.fields_complete && (outcome.code == CURLE_OK || outcome.http_status >= 300);
      if (!answered || outcome.stalled) {
        last = TransportFailure(options, what, outcome);
        if (!last.retryable) return last.status;
        break;
      }
      const int status = outcome.http_status;
      if (status >= 200 && status < 300) {
        return FetchAnswer{status, outcome.headers, url};
      }
      if (IsRedirect(status) && !spec.follow_redirects) {
        return FetchAnswer{status, outcome.headers, url};
      }
      const std::string hub_code = outcome.headers.Get("X-Error-Code").value_or("");
      if (IsRedirect(status)) {
        if (outcome.redirect_url.empty()) {
          return absl::FailedPreconditionError(
              absl::StrCat(what, ": HTTP ", status, " without a usable Location"));
        }
        if (hops + 1 > options.max_redirects) {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": more than ", options.max_redirects, " redirects (max_redirects)"));
        }
        const absl::StatusOr<UrlOrigin> next = OriginOf(outcome.redirect_url);
        if (!next.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat(what, ": redirected to something not http(s)"));
        }
        if (origin.scheme == "https" && next->scheme == "http") {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": redirected from https to http ", UrlForMessages(outcome.redirect_url)));
        }
        ++counters->redirects;
        url = outcome.redirect_url;
        continue;
      }
      const absl::Status error = HttpStatusError(
          method, spec.url, status, hub_code,
          url == spec.url ? "" : absl::StrCat("redirected to ", UrlForMessages(url)));
      if (!IsRetryableHttpStatus(status)) return error;
      last = {error, true, outcome.retry_after};
      break;
    }
  }
  return WithSuffix(last.status,
                    absl::StrCat(", after ", options.max_attempts, " attempt",
                                 options.max_attempts == 1 ? "" : "s", " (max_attempts)"));
}

}  // namespace anisoscope::transfer
