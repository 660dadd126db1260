#include "server/http/response_cache.h"

#include <utility>

namespace anisoscope::server {

ResponseCache::Answer ResponseCache::GetOrCompute(const std::string& key, int64_t version,
                                                  const Compute& compute) {
  std::promise<Answer> promise;
  std::shared_future<Answer> computing_elsewhere;
  {
    absl::MutexLock lock(&mu_);
    if (auto kept = entries_.find(key); kept != entries_.end() && kept->second.version == version) {
      recency_.splice(recency_.begin(), recency_, kept->second.recency);
      ++stats_.hits;
      return kept->second.response;
    }
    if (auto running = pending_.find(key);
        running != pending_.end() && running->second.version == version) {
      ++stats_.shared;
      computing_elsewhere = running->second.answer;
    } else {
      // A computation at another version may still run; its answer is not kept (below).
      pending_[key] = {version, promise.get_future().share()};
      ++stats_.computed;
    }
  }
  if (computing_elsewhere.valid()) return computing_elsewhere.get();
  absl::StatusOr<std::string> body = compute();
  Answer answer =
      body.ok()
          ? Answer(std::make_shared<const EncodedResponse>(EncodeResponse(std::move(body).value())))
          : Answer(body.status());
  {
    absl::MutexLock lock(&mu_);
    if (auto running = pending_.find(key);
        running != pending_.end() && running->second.version == version) {
      pending_.erase(running);
      if (answer.ok()) Keep(key, version, *answer);
    }
  }
  promise.set_value(answer);
  return answer;
}

ResponseCache::Stats ResponseCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.entries = entries_.size();
  return stats;
}

size_t ResponseCache::BytesOf(const std::string& key, const EncodedResponse& response) {
  return key.size() + response.body.size() + response.gzip.size() + response.etag.size();
}

void ResponseCache::Keep(const std::string& key, int64_t version,
                         std::shared_ptr<const EncodedResponse> response) {
  if (auto old = entries_.find(key); old != entries_.end()) Forget(old);
  const size_t bytes = BytesOf(key, *response);
  if (bytes > max_bytes_) return;
  while (stats_.bytes + bytes > max_bytes_ && !recency_.empty()) {
    Forget(entries_.find(recency_.back()));
  }
  recency_.push_front(key);
  entries_[key] = {version, std::move(response), recency_.begin()};
  stats_.bytes += bytes;
}

void ResponseCache::Forget(std::unordered_map<std::string, Entry>::iterator entry) {
  stats_.bytes -= BytesOf(entry->first, *entry->second.response);
  recency_.erase(entry->second.recency);
  entries_.erase(entry);
}

}  // namespace anisoscope::server
