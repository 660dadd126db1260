#include "server/jobs/job_events.h"

namespace anisoscope::server {

void JobEvents::Subscribe(int64_t job_id, JobWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) {
    watcher->OnClosed(closed_);
    return;
  }
  watchers_[job_id].insert(watcher);
}

void JobEvents::Unsubscribe(int64_t job_id, JobWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(job_id);
  if (it == watchers_.end()) return;
  it->second.erase(watcher);
  if (it->second.empty()) watchers_.erase(it);
}

void JobEvents::Publish(int64_t job_id, const ::anisoscope::v1::JobEvent& event) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(job_id);
  if (it == watchers_.end()) return;
  for (JobWatcher* watcher : it->second) watcher->OnEvent(event);
  if (event.kind() == ::anisoscope::v1::JobEvent::KIND_JOB_FINISHED) watchers_.erase(it);
}

void JobEvents::CloseAll(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  closed_ = status.ok() ? absl::UnavailableError("server is shutting down") : status;
  for (auto& [job_id, watchers] : watchers_) {
    for (JobWatcher* watcher : watchers) watcher->OnClosed(closed_);
  }
  watchers_.clear();
}

int JobEvents::NumWatchers(int64_t job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(job_id);
  return it == watchers_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace anisoscope::server
