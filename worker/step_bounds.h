// StepBounds: what one step may cost a worker process, whatever its checkpoint's files
// hold: memory (--worker-memory-max, the kernel's RLIMIT_DATA on the process) and time
// (--step-timeout, a deadline per step kept by StepWatchdog). anisoscope-worker applies them
// to itself; anisoscope-server passes them to its embedded worker processes.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace anisoscope::worker {

struct StepBounds {
  // --step-timeout: seconds one step may run; 0: derived from the step's measured rate
  // (StepWatchdog).
  double step_timeout_seconds = 0;
  // --worker-memory-max: bytes of heap and anonymous memory the process may hold (a
  // checkpoint's read-only mapping is not counted); 0: no cap.
  uint64_t memory_max_bytes = 0;
};

// Caps this process's data segment (heap, anonymous mappings, thread stacks) at `bytes`
// with setrlimit(RLIMIT_DATA); does nothing for 0. The kernel then refuses the allocation
// that would cross it (LibTorch and operator new throw), so a step fails instead of the
// machine swapping.
absl::Status ApplyMemoryCap(uint64_t bytes);

// True when `status` reports an allocation that failed (std::bad_alloc, LibTorch's
// "not enough memory", RESOURCE_EXHAUSTED).
bool IsAllocationFailure(const absl::Status& status);

// The error of a step that hit the memory cap: says which bound, its value and how to
// raise it, then `status`'s message.
std::string MemoryBoundError(const StepBounds& bounds, const absl::Status& status);

// True when the process's data segment is within kNearCapBytes of a memory cap: a step past
// its deadline there was most likely waiting for memory the kernel refuses (OpenBLAS, for
// one, retries a refused buffer without end rather than fail).
inline constexpr uint64_t kNearCapBytes = 64ull << 20;
bool NearMemoryCap(const StepBounds& bounds);

// "4.0 GiB", "512.0 MiB": a byte count for people.
std::string FormatBytes(uint64_t bytes);

}  // namespace anisoscope::worker
