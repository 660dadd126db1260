#include "server/jobs/watch_streams.h"

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::Status WatchSlots::Acquire(const std::string& caller, const std::string& ns) {
  absl::MutexLock lock(&mu_);
  int& of_caller = by_caller_[caller];
  int& of_namespace = by_namespace_[ns];
  absl::Status full;
  if (of_caller >= limits_.max_watch_streams_per_caller) {
    full = absl::ResourceExhaustedError(
        absl::StrCat("caller '", caller, "' has ", of_caller,
                     " WatchJob streams open, its limit "
                     "(--max-watch-streams-per-caller); close one, or poll GetJob"));
  } else if (of_namespace >= limits_.max_watch_streams_per_namespace) {
    full = absl::ResourceExhaustedError(
        absl::StrCat("namespace '", ns, "' has ", of_namespace,
                     " WatchJob streams open, its limit "
                     "(--max-watch-streams-per-namespace); close one, or poll GetJob"));
  } else if (open_ >= limits_.max_watch_streams) {
    full = absl::ResourceExhaustedError(
        absl::StrCat("this server has ", open_,
                     " WatchJob streams open, its limit (--max-watch-streams); try again "
                     "later or poll GetJob"));
  }
  if (!full.ok()) {
    if (of_caller == 0) by_caller_.erase(caller);
    if (of_namespace == 0) by_namespace_.erase(ns);
    return full;
  }
  ++of_caller;
  ++of_namespace;
  ++open_;
  return absl::OkStatus();
}

void WatchSlots::Release(const std::string& caller, const std::string& ns) {
  absl::MutexLock lock(&mu_);
  if (--by_caller_[caller] <= 0) by_caller_.erase(caller);
  if (--by_namespace_[ns] <= 0) by_namespace_.erase(ns);
  --open_;
}

int WatchSlots::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

void JobEventQueue::Append(const pb::JobEvent& event) {
  const size_t bytes = event.ByteSizeLong();
  if (!events_.empty()) waiting_bytes_ += bytes;
  events_.push_back({event, bytes});
}

void JobEventQueue::Push(const pb::JobEvent& event) {
  const size_t waiting = events_.empty() ? 0 : events_.size() - 1;
  if (waiting == 0 ||
      (waiting < kMaxWaiting && waiting_bytes_ + event.ByteSizeLong() <= kMaxWaitingBytes)) {
    Append(event);
    return;
  }
  // Erasing at the end leaves the front, perhaps being written, where it is.
  Truncate(1);
  pb::JobEvent snapshot;
  snapshot.set_kind(pb::JobEvent::KIND_SNAPSHOT);
  *snapshot.mutable_job() = event.job();
  Append(snapshot);
  if (event.kind() == pb::JobEvent::KIND_JOB_FINISHED) Append(event);
  ++coalesced_;
}

void JobEventQueue::Pop() {
  events_.pop_front();
  if (!events_.empty()) waiting_bytes_ -= events_.front().bytes;
}

void JobEventQueue::Truncate(size_t keep) {
  if (events_.size() <= keep) return;
  events_.erase(events_.begin() + static_cast<std::ptrdiff_t>(keep), events_.end());
  waiting_bytes_ = 0;
  for (size_t i = 1; i < events_.size(); ++i) waiting_bytes_ += events_[i].bytes;
}

}  // namespace anisoscope::server
