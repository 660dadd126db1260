// One HTTP request and its answer on a libcurl easy handle: no redirect followed, no retry
// (HttpClient decides both). The answer's fields are kept; a 2xx body streams into a
// BodySink as it arrives; any other body is read and dropped (a bounded amount). A request's
// cancel flag is read at least every kCancelPoll and at every body write. Not thread-safe:
// one exchange per call of HttpClient, reused across its hops and attempts so that a retry
// to the same host reuses the connection.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "sources/transfer/response_headers.h"
#include "sources/transfer/transfer_options.h"

namespace anisoscope::transfer {

// Where a successful answer's body goes.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // Where the next attempt should start (a "Range: bytes=N-" when above 0).
  virtual int64_t ResumeOffset() const { return 0; }
  // A 2xx answer's status and fields, before its first body byte. An error refuses the
  // answer; UNAVAILABLE says a new attempt may succeed, anything else that none will.
  virtual absl::Status Begin(int http_status, const ResponseHeaders& headers) = 0;
  // The next piece of the body; an error abandons the transfer (same codes as Begin).
  virtual absl::Status Write(absl::string_view bytes) = 0;
};

struct ExchangeRequest {
  std::string url;
  bool head = false;                          // HEAD: the fields only
  std::vector<std::string> headers;           // extra "Name: value" lines, already checked
  int64_t range_start = 0;                    // above 0: "Range: bytes=N-"
  bool with_credentials = false;              // this request goes to the credentials' origin
  const std::atomic<bool>* cancel = nullptr;  // once true, the exchange is abandoned; may be null
};

struct ExchangeOutcome {
  CURLcode code = CURLE_OK;
  int http_status = 0;           // 0 when no answer's fields came
  bool fields_complete = false;  // the answer's fields all came
  ResponseHeaders headers;
  std::string redirect_url;    // absolute, from Location; empty when none
  absl::Duration retry_after;  // the answer's Retry-After; zero when none
  absl::Status sink_status;    // the sink refused the answer or a piece of its body
  bool stalled = false;        // abandoned: no byte for stall_timeout
  bool cancelled = false;      // abandoned: the request's cancel flag was set
  int64_t body_bytes = 0;      // body bytes received, of any status
};

class CurlExchange {
 public:
  // The longest a set cancel flag goes unread while a request is in flight.
  static constexpr absl::Duration kCancelPoll = absl::Milliseconds(100);

  // INVALID_ARGUMENT for credentials that cannot go into a request (no secret is quoted).
  static absl::StatusOr<std::unique_ptr<CurlExchange>> Create(const TransferOptions& options,
                                                              const Credentials& credentials);
  ~CurlExchange();
  CurlExchange(const CurlExchange&) = delete;
  CurlExchange& operator=(const CurlExchange&) = delete;

  // Sends `request` and reads its answer; blocks until it ends, fails, stalls or is
  // cancelled. `sink` may be null (nothing expected in the body).
  ExchangeOutcome Run(const ExchangeRequest& request, BodySink* sink);

 private:
  using Clock = std::chrono::steady_clock;
  CurlExchange(const TransferOptions& options, const Credentials& credentials, CURLM* multi,
               CURL* easy);
  // Runs the configured handle to its end on multi_, waking every kCancelPoll to read the
  // cancel flag; the transfer's result code.
  CURLcode Perform();
  bool Cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  static size_t OnHeader(char* data, size_t size, size_t count, void* self);
  static size_t OnBody(char* data, size_t size, size_t count, void* self);
  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t);

  const TransferOptions& options_;
  const Credentials& credentials_;
  // The connection cache lives in multi_, so it survives curl_easy_reset between requests.
  CURLM* const multi_;
  CURL* const easy_;
  // The one request in flight.
  const std::atomic<bool>* cancel_ = nullptr;
  BodySink* sink_ = nullptr;
  ExchangeOutcome* outcome_ = nullptr;
  Clock::time_point last_byte_;
  int64_t dropped_bytes_ = 0;
};

}  // namespace anisoscope::transfer
