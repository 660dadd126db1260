#include "worker/worker_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "analysis/extractor/device_memory.h"

namespace anisoscope::worker {

namespace pb = ::anisoscope::v1;

WorkerLoop::WorkerLoop(const Options& options, pb::WorkerService::StubInterface* stub,
                       const ExtractorFactory* factory, const FileGate* own_files)
    : options_(options),
      client_(stub, options.metadata),
      runner_(factory, own_files, &client_, options.info.name(), options.guard,
              options.remote_source) {}

int WorkerLoop::Run() {
  int units = 0;
  int failures = 0;  // consecutive failed lease calls
  absl::Time idle_since = absl::Now();
  while (!client_.stopped()) {
    if (options_.max_units > 0 && units >= options_.max_units) {
      spdlog::info("worker {}: ran {} unit(s), the most it may (--max-units); exiting",
                   options_.info.name(), units);
      break;
    }
    absl::Duration wait = options_.lease_wait;
    if (options_.idle_exit > absl::ZeroDuration()) {
      const absl::Duration left = idle_since + options_.idle_exit - absl::Now();
      if (left <= absl::ZeroDuration()) {
        spdlog::info("worker {}: idle for {}; exiting (--idle-exit)", options_.info.name(),
                     absl::FormatDuration(options_.idle_exit));
        break;
      }
      wait = std::min(wait, left);
    }
    pb::LeaseWorkRequest request;
    *request.mutable_worker() = options_.info;
    request.mutable_worker()->set_free_memory_bytes(
        analysis::FreeMemoryBytes(c10::Device(options_.info.device())));
    request.set_wait_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(wait)));
    absl::StatusOr<pb::LeaseWorkResponse> response = client_.Lease(request);
    if (!response.ok()) {
      if (client_.stopped()) break;
      if (absl::IsUnauthenticated(response.status()) ||
          absl::IsPermissionDenied(response.status())) {
        refusal_ = response.status();  // retrying would not change the server's mind
        spdlog::error(
            "worker {}: the server refuses this worker: {} (give it a worker token "
            "with --token-file or $ANISOSCOPE_TOKEN)",
            options_.info.name(), std::string(response.status().message()));
        break;
      }
      const absl::Duration backoff = Backoff(failures++);
      spdlog::warn("worker {}: cannot lease work: {}; retrying in {}", options_.info.name(),
                   response.status().ToString(),
                   absl::FormatDuration(absl::Trunc(backoff, absl::Milliseconds(1))));
      client_.Sleep(backoff);
      continue;
    }
    failures = 0;
    if (!response->has_unit()) {
      runner_.Idle();
      continue;
    }
    runner_.Run(response->unit());
    ++units;
    idle_since = absl::Now();
  }
  runner_.Flush();
  return units;
}

}  // namespace anisoscope::worker
