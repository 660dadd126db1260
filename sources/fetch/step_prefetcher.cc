#include "sources/fetch/step_prefetcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace anisoscope::fetch {

StepPrefetcher::StepPrefetcher(const StepFetcher* fetcher, StepPrefetcherOptions options,
                               FetchProgressCallback on_progress)
    : fetcher_(fetcher), options_(options), on_progress_(std::move(on_progress)) {}

StepPrefetcher::~StepPrefetcher() { Cancel(); }

std::string StepPrefetcher::Key(const FetchStep& step) {
  return absl::StrCat(step.cache_step.repo.folder, "/", step.cache_step.snapshot);
}

absl::Status StepPrefetcher::Start(const FetchStep& step) {
  if (options_.depth < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch depth ", options_.depth, " is below 1"));
  }
  const std::string key = Key(step);
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_.load()) {
    return absl::CancelledError(
        absl::StrCat("prefetching ", DescribeStep(step.cache_step), ": the pipeline is cancelled"));
  }
  if (entries_.count(key) != 0) return absl::OkStatus();
  if (static_cast<int>(queue_.size()) >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat("prefetching ", DescribeStep(step.cache_step), ": ", queue_.size(),
                     " steps are already waiting (at most ", options_.max_queued, ")"));
  }
  Entry entry;
  entry.step = step;
  entries_.emplace(key, std::move(entry));
  queue_.push_back(key);
  if (!thread_.joinable()) thread_ = std::thread(&StepPrefetcher::Run, this);
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<FetchedStep> StepPrefetcher::Take(const FetchStep& step) {
  const std::string key = Key(step);
  const auto cancelled = [&] {
    return absl::CancelledError(
        absl::StrCat("fetching ", DescribeStep(step.cache_step), ": the pipeline is cancelled"));
  };
  std::unique_lock<std::mutex> lock(mutex_);
  if (cancelled_.load()) return cancelled();
  auto found = entries_.find(key);
  if (found == entries_.end() || (!found->second.running && !found->second.result.has_value())) {
    // Not started, or still queued (Run skips a key it no longer finds): fetched here.
    if (found != entries_.end()) entries_.erase(found);
    lock.unlock();
    return fetcher_->Fetch(step, on_progress_, &cancelled_);
  }
  changed_.wait(lock, [&] {
    if (cancelled_.load()) return true;
    const auto entry = entries_.find(key);
    return entry != entries_.end() && entry->second.result.has_value();
  });
  if (cancelled_.load()) return cancelled();
  found = entries_.find(key);
  absl::StatusOr<FetchedStep> result = *std::move(found->second.result);
  entries_.erase(found);
  --held_;
  changed_.notify_all();
  return result;
}

void StepPrefetcher::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_.store(true);
    queue_.clear();
    // Fetched steps not taken are dropped here, their pins with them.
    for (auto entry = entries_.begin(); entry != entries_.end();) {
      entry = entry->second.running ? std::next(entry) : entries_.erase(entry);
    }
    held_ = static_cast<int>(entries_.size());
    changed_.notify_all();
  }
  std::call_once(joined_, [this] {
    if (thread_.joinable()) thread_.join();
  });
}

int StepPrefetcher::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

void StepPrefetcher::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock,
                  [&] { return cancelled_.load() || (!queue_.empty() && held_ < options_.depth); });
    if (cancelled_.load()) return;
    const std::string key = queue_.front();
    queue_.pop_front();
    auto entry = entries_.find(key);
    // Gone: Take() fetched it itself. Running or fetched: a second Start() queued it again.
    if (entry == entries_.end() || entry->second.running || entry->second.result.has_value()) {
      continue;
    }
    entry->second.running = true;
    ++held_;
    const FetchStep& step = entry->second.step;  // map nodes stay put; running ones stay
    lock.unlock();
    absl::StatusOr<FetchedStep> result = fetcher_->Fetch(step, on_progress_, &cancelled_);
    lock.lock();
    entry = entries_.find(key);
    entry->second.running = false;
    if (cancelled_.load()) {
      entries_.erase(entry);  // the pin goes with it
      --held_;
    } else {
      entry->second.result = std::move(result);
    }
    changed_.notify_all();
  }
}

}  // namespace anisoscope::fetch
