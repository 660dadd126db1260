// CheckpointPrefetcher: reads the next checkpoint of a series into the page cache while
// the current one is computed, so that its load finds the weights in memory (on a GPU the
// read is most of a step). Bounded to one checkpoint ahead: starting another stops the
// read in progress. The pages are the kernel's cache, not this process's memory. A hint
// only: a missing or unreadable checkpoint is skipped silently (its own load reports it).
#pragma once

#include <atomic>
#include <filesystem>
#include <thread>

#include "common/file_gate.h"

namespace anisoscope::analysis {

class CheckpointPrefetcher {
 public:
  CheckpointPrefetcher() = default;
  CheckpointPrefetcher(const CheckpointPrefetcher&) = delete;
  CheckpointPrefetcher& operator=(const CheckpointPrefetcher&) = delete;
  ~CheckpointPrefetcher() { Stop(); }

  // Starts reading `dir`'s config.json and weight files (as the loader would choose them,
  // each opened through `gate`) ahead on a thread of its own, after stopping any read in
  // progress.
  void Start(const std::filesystem::path& dir, const FileGate& gate);
  // Stops the read in progress, if any, and waits for its thread.
  void Stop();

 private:
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

// Reads `file` through a small buffer, which leaves it in the page cache, until done or
// `stop` is set. (posix_fadvise WILLNEED returned at once and cached nothing on this
// project's machine.) Returns false when the file cannot be opened or read.
bool ReadAheadFile(const std::filesystem::path& file, const FileGate& gate,
                   const std::atomic<bool>& stop);

}  // namespace anisoscope::analysis
