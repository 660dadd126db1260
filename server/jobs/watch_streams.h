// What one WatchJob stream may hold, and how many streams a caller may hold: the two
// bounds that keep a reader that never ends (a followed job never finishes) or never reads
// from costing the server without limit.
//
// WatchSlots counts the open streams, in all, per caller and per namespace, each bounded
// by RequestLimits; thread-safe. JobEventQueue holds one stream's events waiting to be
// written, bounded; not thread-safe (its reactor locks it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/wire/request_limits.h"

namespace anisoscope::server {

class WatchSlots {
 public:
  explicit WatchSlots(const RequestLimits& limits) : limits_(limits) {}
  WatchSlots(const WatchSlots&) = delete;
  WatchSlots& operator=(const WatchSlots&) = delete;

  // Takes a place for a stream of `caller` (a Principal's name) in namespace `ns`; or,
  // taking nothing, RESOURCE_EXHAUSTED naming the first full bound: the caller's, the
  // namespace's, then the server's.
  absl::Status Acquire(const std::string& caller, const std::string& ns);
  // Gives back a place Acquire took.
  void Release(const std::string& caller, const std::string& ns);
  // Streams open now (for tests).
  int open() const;

 private:
  const RequestLimits limits_;
  mutable absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> by_caller_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> by_namespace_ ABSL_GUARDED_BY(mu_);
};

// A stream's events in order. At most kMaxWaiting events, of kMaxWaitingBytes together,
// wait behind the front one (which may be being written); when one more would pass either,
// those waiting collapse into one KIND_SNAPSHOT of the newest event's job (each event
// carries the job after it), followed by the new event when it is KIND_JOB_FINISHED. So a
// reader that falls behind costs a bounded amount of memory (the bounds plus three events)
// and still learns where the job stands.
class JobEventQueue {
 public:
  static constexpr size_t kMaxWaiting = 8;
  static constexpr size_t kMaxWaitingBytes = 4 << 20;

  void Push(const ::anisoscope::v1::JobEvent& event);
  bool empty() const { return events_.empty(); }
  size_t size() const { return events_.size(); }
  // The oldest event; its address is stable until Pop (Push never moves it).
  const ::anisoscope::v1::JobEvent& front() const { return events_.front().event; }
  void Pop();
  // Drops all but the first `keep` events.
  void Truncate(size_t keep);
  // Times waiting events were collapsed into a snapshot.
  int64_t coalesced() const { return coalesced_; }

 private:
  struct Queued {
    ::anisoscope::v1::JobEvent event;
    size_t bytes = 0;
  };
  void Append(const ::anisoscope::v1::JobEvent& event);

  std::deque<Queued> events_;
  size_t waiting_bytes_ = 0;  // of the events behind the front one
  int64_t coalesced_ = 0;
};

}  // namespace anisoscope::server
