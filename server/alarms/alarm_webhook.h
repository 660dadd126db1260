// AlarmWebhook: POSTs each alarm fired or resolved to --alarm-webhook as JSON, from a thread
// of its own, so that storing a step never waits for the receiver.
//
// Body: {"alarm": <the anisoscope.v1.Alarm in the HTTP API's JSON>}. A delivery that fails
// (no connection, a timeout, HTTP 408, 429 or 5xx) is retried with doubling backoff, up to
// `attempts` in all; other answers end it. At most `max_queued` alarms wait; one more is
// dropped. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/types.h"

namespace anisoscope::server {

class AlarmWebhook {
 public:
  struct Options {
    std::string url;  // http:// or https://HOST[:PORT][/PATH] (--alarm-webhook)
    int attempts = 5;
    absl::Duration first_backoff = absl::Milliseconds(500);
    absl::Duration timeout = absl::Seconds(5);  // connecting, and each read or write
    int max_queued = 1000;
  };
  // Deliveries by outcome, for /metrics.
  struct Counts {
    int64_t delivered = 0;
    int64_t failed = 0;   // every attempt failed, or the receiver refused it
    int64_t dropped = 0;  // the queue was full
  };

  // INVALID_ARGUMENT for a URL that is not http(s)://HOST[:PORT][/PATH].
  static absl::StatusOr<std::unique_ptr<AlarmWebhook>> Create(const Options& options);
  // Waits for the delivery in progress (at most one attempt's timeout), then stops; what is
  // still queued is counted as dropped (the alarms themselves stay stored).
  ~AlarmWebhook();

  // Queues `alarm` for delivery; never blocks on the network.
  void Send(const storage::AlarmRecord& alarm);
  Counts counts() const;
  // anisoscope_alarm_webhook_deliveries_total by outcome, Prometheus text.
  std::string Exposition() const;

 private:
  AlarmWebhook(Options options, std::string origin, std::string path);
  void Run();
  bool Deliver(const std::string& body);  // true when the receiver took it (2xx)

  const Options options_;
  const std::string origin_;  // scheme://host:port
  const std::string path_;
  mutable absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);  // JSON bodies
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace anisoscope::server
