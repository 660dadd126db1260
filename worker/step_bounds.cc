#include "worker/step_bounds.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process_memory.h"

namespace anisoscope::worker {

absl::Status ApplyMemoryCap(uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  const rlimit limit{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  if (setrlimit(RLIMIT_DATA, &limit) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--worker-memory-max: cannot cap this process's memory: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool IsAllocationFailure(const absl::Status& status) {
  if (absl::IsResourceExhausted(status)) return true;
  const absl::string_view message = status.message();
  return absl::StrContains(message, "bad_alloc") ||
         absl::StrContains(message, "not enough memory") ||
         absl::StrContains(message, "Cannot allocate memory") ||
         absl::StrContains(message, "can't allocate memory");
}

std::string MemoryBoundError(const StepBounds& bounds, const absl::Status& status) {
  return absl::StrCat("the step needed more memory than --worker-memory-max allows (",
                      FormatBytes(bounds.memory_max_bytes),
                      "); raise --worker-memory-max on the worker (on anisoscope-server for its "
                      "embedded workers) if the checkpoint is legitimate: ",
                      status.message());
}

bool NearMemoryCap(const StepBounds& bounds) {
  return bounds.memory_max_bytes > 0 &&
         DataSegmentBytes() + kNearCapBytes >= bounds.memory_max_bytes;
}

std::string FormatBytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

}  // namespace anisoscope::worker
