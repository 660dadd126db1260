// ResponseCache: the encoded answers of the store-backed API queries, each kept until the
// store's DataVersion moves on, so that a hundred dashboards polling one run cost one
// query per change. Concurrent misses of one key wait for the first one's answer instead
// of querying the store again (a write invalidates every poller's answer at once).
//
// Thread-safe. Bounded: least recently used answers go first once `max_bytes` is passed.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/http/encoded_response.h"

namespace anisoscope::server {

class ResponseCache {
 public:
  using Answer = absl::StatusOr<std::shared_ptr<const EncodedResponse>>;
  using Compute = std::function<absl::StatusOr<std::string>()>;

  explicit ResponseCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The answer for `key` as of store version `version`: the kept one when it was computed
  // at that version, else `compute`'s body, encoded (and kept when it is OK). A caller that
  // arrives while another computes the same key and version waits for that answer.
  Answer GetOrCompute(const std::string& key, int64_t version, const Compute& compute);

  struct Stats {
    int64_t hits = 0;      // answered from the cache
    int64_t shared = 0;    // waited for another caller's computation
    int64_t computed = 0;  // computed
    size_t entries = 0;
    size_t bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    int64_t version = 0;
    std::shared_ptr<const EncodedResponse> response;
    std::list<std::string>::iterator recency;  // position in recency_
  };
  struct Pending {
    int64_t version = 0;
    std::shared_future<Answer> answer;
  };

  static size_t BytesOf(const std::string& key, const EncodedResponse& response);
  void Keep(const std::string& key, int64_t version,
            std::shared_ptr<const EncodedResponse> response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(std::unordered_map<std::string, Entry>::iterator entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anisoscope::server
