#include "sources/fetch/step_fetcher.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::fetch {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `status` with `context` in front, keeping its code.
absl::Status Wrap(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

absl::Status CheckShape(const FetchStep& step, const std::string& where) {
  if (step.files.size() != step.cache_step.files.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", step.files.size(), " sources for ",
                                                   step.cache_step.files.size(),
                                                   " files (the lists must be parallel)"));
  }
  if (step.files.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no files"));
  return absl::OkStatus();
}

}  // namespace

std::string DescribeStep(const cache::CacheStep& step) {
  if (step.revision.empty()) return absl::StrCat(step.repo.display, " step ", step.snapshot);
  return absl::StrCat(step.repo.display, " revision ", step.revision, " (commit ", step.snapshot,
                      ")");
}

absl::StatusOr<FetchedStep> StepFetcher::Fetch(const FetchStep& step,
                                               const FetchProgressCallback& on_progress,
                                               const std::atomic<bool>* cancel) const {
  const Clock::time_point start = Clock::now();
  const std::string where = DescribeStep(step.cache_step);
  RETURN_IF_ERROR(CheckShape(step, where));
  if (cancel != nullptr && cancel->load()) {
    return absl::CancelledError(absl::StrCat(where, ": cancelled before its download"));
  }

  // Pinned first, so that no other process evicts the step between the check and the use.
  absl::StatusOr<cache::StepPin> pinned = cache_->Pin(step.cache_step);
  if (!pinned.ok()) return Wrap(pinned.status(), absl::StrCat("fetching ", where));
  cache::StepPin pin = *std::move(pinned);

  FetchStats stats;
  absl::StatusOr<std::filesystem::path> found = cache_->FindComplete(step.cache_step);
  if (found.ok()) {
    stats.cache_hit = true;
    stats.seconds = SecondsSince(start);
    return FetchedStep{std::move(pin), *std::move(found), stats};
  }
  if (!absl::IsNotFound(found.status())) {
    return Wrap(found.status(), absl::StrCat("fetching ", where));
  }

  FetchProgress progress;
  progress.step = where;
  progress.file_count = static_cast<int>(step.files.size());
  for (const cache::StepFile& file : step.cache_step.files) {
    progress.step_size += static_cast<int64_t>(file.size);
  }
  int64_t step_done = 0;
  const auto report = [&](int64_t file_bytes, double rate) {
    if (!on_progress) return;
    const cache::SourceCacheMetrics metrics = cache_->metrics();
    progress.file_bytes = file_bytes;
    progress.step_bytes = step_done + file_bytes;
    progress.bytes_per_second = rate;
    progress.cache_bytes = metrics.bytes_cached;
    progress.cache_reserved_bytes = metrics.bytes_reserved;
    on_progress(progress);
  };

  for (size_t i = 0; i < step.files.size(); ++i) {
    const cache::StepFile& file = step.cache_step.files[i];
    const FetchFile& source = step.files[i];
    const std::string context = absl::StrCat("fetching ", where, " file '", file.path, "'");
    if (cancel != nullptr && cancel->load()) {
      return absl::CancelledError(absl::StrCat(context, ": cancelled"));
    }
    progress.file = file.path;
    progress.file_index = static_cast<int>(i);
    progress.file_size = static_cast<int64_t>(file.size);

    absl::StatusOr<std::optional<cache::PendingBlob>> begun = cache_->BeginFile(pin, file);
    if (!begun.ok()) return Wrap(begun.status(), context);
    if (!begun->has_value()) {
      ++stats.files_reused;
    } else {
      cache::PendingBlob blob = **std::move(begun);
      transfer::DownloadRequest request;
      request.url = source.url;
      request.path = blob.incomplete_path().string();
      request.expected_size = static_cast<int64_t>(file.size);
      request.expected_sha256 = source.expected_sha256;
      request.cancel = cancel;
      request.on_progress = [&](const transfer::DownloadProgress& at) {
        report(at.bytes, at.bytes_per_second);
      };
      // On failure the transfer removes the file and `blob`, dropped here, its reservation.
      absl::StatusOr<transfer::DownloadResult> done = client_->DownloadToFile(request);
      if (!done.ok()) return Wrap(done.status(), context);
      stats.bytes_fetched += done->counters.bytes_fetched;
      stats.retries += done->counters.retries;
      stats.bytes_downloaded += done->bytes;
      ++stats.files_downloaded;
      if (absl::Status committed = cache_->CommitFile(std::move(blob)); !committed.ok()) {
        return Wrap(committed, context);
      }
    }
    report(static_cast<int64_t>(file.size), 0);
    step_done += static_cast<int64_t>(file.size);
  }

  absl::StatusOr<std::filesystem::path> folder = cache_->FinishStep(pin);
  if (!folder.ok()) return Wrap(folder.status(), absl::StrCat("fetching ", where));
  stats.seconds = SecondsSince(start);
  stats.bytes_per_second = stats.seconds > 0 ? stats.bytes_fetched / stats.seconds : 0;
  return FetchedStep{std::move(pin), *std::move(folder), stats};
}

}  // namespace anisoscope::fetch
