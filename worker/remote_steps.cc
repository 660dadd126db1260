#include "worker/remote_steps.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "sources/endpoints/remote_checkpoint.h"
#include "sources/fetch/step_fetcher.h"

namespace anisoscope::worker {
namespace {

namespace pb = ::anisoscope::v1;

// How often the fetch's cancel condition is polled, and how often progress is logged.
constexpr auto kCancelPoll = std::chrono::milliseconds(100);
constexpr absl::Duration kLogInterval = absl::Seconds(5);

// As StepPrefetcher matches steps: the repo's folder and the snapshot.
std::string KeyOf(const fetch::FetchStep& step) {
  return absl::StrCat(step.cache_step.repo.folder, "/", step.cache_step.snapshot);
}

std::string Megabytes(double bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

}  // namespace

absl::StatusOr<fetch::FetchedStep> RemoteSteps::Fetch(const pb::WorkUnit& unit,
                                                      const ProgressSink& on_progress,
                                                      const std::function<bool()>& cancelled) {
  ASSIGN_OR_RETURN(const fetch::FetchStep plan, source_->Plan(unit.remote(), unit.step()));
  ASSIGN_OR_RETURN(const fetch::StepFetcher* fetcher, source_->Fetcher(unit.remote().kind()));
  const std::string key = KeyOf(plan);
  if (!started_key_.empty() && started_key_ != key) DropPrefetched();
  started_key_.clear();
  fetch::StepPrefetcher* prefetcher = PrefetcherFor(unit.remote().kind(), fetcher);
  const std::string where = fetch::DescribeStep(plan.cache_step);
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    current_ = where;
    sink_ = on_progress;
  }

  // Watches `cancelled` while Take blocks; cancelling the prefetcher stops the download in
  // flight, whichever thread runs it.
  std::mutex watch_mu;
  std::condition_variable watch_done;
  bool done = false;
  bool cancelled_here = false;
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(watch_mu);
    while (!watch_done.wait_for(lock, kCancelPoll, [&] { return done; })) {
      if (cancelled()) {
        cancelled_here = true;
        lock.unlock();
        prefetcher->Cancel();
        return;
      }
    }
  });
  absl::StatusOr<fetch::FetchedStep> fetched = prefetcher->Take(plan);
  {
    std::lock_guard<std::mutex> lock(watch_mu);
    done = true;
  }
  watch_done.notify_all();
  watcher.join();
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    current_.clear();
    sink_ = nullptr;
  }
  if (cancelled_here) {
    DropPrefetched();  // a cancelled prefetcher is done for good: the next unit makes another
    if (fetched.ok()) return absl::CancelledError(absl::StrCat("fetching ", where, ": cancelled"));
    return fetched.status();
  }
  if (!fetched.ok()) return fetched.status();
  const fetch::FetchStats& stats = fetched->stats;
  const cache::SourceCache* cache = source_->cache();
  const cache::SourceCacheMetrics metrics = cache->metrics();
  if (stats.cache_hit) {
    spdlog::info("worker {}: job {} step {}: {} found in the cache ({} of {})", name_,
                 unit.job_id(), unit.step(), sources::DescribeRemoteCheckpoint(unit.remote()),
                 Megabytes(metrics.bytes_cached), Megabytes(source_->cache_max_bytes()));
  } else {
    spdlog::info(
        "worker {}: job {} step {}: fetched {} ({} in {} file(s), {} reused) in {:.1f} s at "
        "{}/s, {} retries; cache {} of {}",
        name_, unit.job_id(), unit.step(), sources::DescribeRemoteCheckpoint(unit.remote()),
        Megabytes(stats.bytes_downloaded), stats.files_downloaded, stats.files_reused,
        stats.seconds, Megabytes(stats.bytes_per_second), stats.retries,
        Megabytes(metrics.bytes_cached), Megabytes(source_->cache_max_bytes()));
  }
  StartNext(unit);
  return fetched;
}

void RemoteSteps::DropPrefetched() {
  for (std::unique_ptr<fetch::StepPrefetcher>& prefetcher : prefetchers_) prefetcher.reset();
  started_key_.clear();
}

fetch::StepPrefetcher* RemoteSteps::PrefetcherFor(pb::SourceKind kind,
                                                  const fetch::StepFetcher* fetcher) {
  std::unique_ptr<fetch::StepPrefetcher>& slot = prefetchers_[kind == pb::SOURCE_KIND_S3 ? 1 : 0];
  if (slot == nullptr) {
    slot = std::make_unique<fetch::StepPrefetcher>(
        fetcher, fetch::StepPrefetcherOptions{/*depth=*/1},
        [this](const fetch::FetchProgress& progress) { OnProgress(progress); });
  }
  return slot.get();
}

void RemoteSteps::StartNext(const pb::WorkUnit& unit) {
  if (!unit.has_next_remote()) return;
  const pb::RemoteCheckpoint& next = unit.next_remote();
  absl::StatusOr<fetch::FetchStep> plan = source_->Plan(next, 0);
  absl::StatusOr<const fetch::StepFetcher*> fetcher =
      plan.ok() ? source_->Fetcher(next.kind()) : plan.status();
  absl::Status started =
      fetcher.ok() ? PrefetcherFor(next.kind(), *fetcher)->Start(*plan) : fetcher.status();
  if (!started.ok()) {
    spdlog::warn("worker {}: not fetching {} ahead: {}", name_,
                 sources::DescribeRemoteCheckpoint(next), started.ToString());
    return;
  }
  started_key_ = KeyOf(*plan);
}

void RemoteSteps::OnProgress(const fetch::FetchProgress& progress) {
  std::lock_guard<std::mutex> lock(progress_mu_);
  const bool current = !current_.empty() && progress.step == current_;
  if (current && sink_) sink_(progress);
  const absl::Time now = absl::Now();
  if (now - last_log_ < kLogInterval) return;
  last_log_ = now;
  spdlog::info("worker {}: fetching {}{}: {} of {} at {}/s (file {} of {}); cache {} of {}", name_,
               progress.step, current ? "" : " (ahead)",
               Megabytes(static_cast<double>(progress.step_bytes)),
               Megabytes(static_cast<double>(progress.step_size)),
               Megabytes(progress.bytes_per_second), progress.file_index + 1, progress.file_count,
               Megabytes(static_cast<double>(progress.cache_bytes + progress.cache_reserved_bytes)),
               Megabytes(static_cast<double>(source_->cache_max_bytes())));
}

}  // namespace anisoscope::worker
