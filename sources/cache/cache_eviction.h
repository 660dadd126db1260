// Making room in the source cache: least recently used steps first, never one in use.
// Call with the node lock held, on a fresh ScanCache(). Thread-compatible.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "sources/cache/cache_scan.h"

namespace anisoscope::cache {

struct EvictionResult {
  uint64_t steps = 0;  // snapshots removed
  uint64_t bytes = 0;  // blob bytes removed
};

// Removes, until `scan`'s blobs and reservations plus `need` fit in `max_bytes`: first blobs
// no snapshot links that are older than `stale_after` (left by a writer that died between
// rename and link), then the least recently used snapshot not in `scan->in_use`, with its
// refs/ entries and the blobs no remaining snapshot of its repo links (a blob two steps
// share stays while one of them does). Updates `scan` to match the disk.
EvictionResult EvictUntilFits(int root, uint64_t need, uint64_t max_bytes,
                              absl::Duration stale_after, CacheScan* scan);

// Removes one snapshot as above (for tests and for an operator's explicit eviction).
EvictionResult EvictSnapshot(int root, size_t index, CacheScan* scan);

}  // namespace anisoscope::cache
