// What the source cache holds, read from the disk under the node lock: the disk is the
// ledger, so no counter can drift when a process dies mid-update. Counts the blobs of the
// repos the cache manages (`models--*` and `s3--*` folders), the live reservations of
// downloads in progress, and which steps are in use (live pins and reservations). Sweeps
// as it goes what dead processes left: their pins, reservations and `.incomplete` files,
// and any `.incomplete` file unwritten for longer than `stale_after`.
// Call with the node lock held. Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace anisoscope::cache {

// A step as the cache's bookkeeping names it: "REPO_FOLDER/SNAPSHOT".
std::string StepKey(const std::string& repo_folder, const std::string& snapshot);

struct ScannedSnapshot {
  std::string repo_folder;
  std::string name;
  absl::Time last_used;         // the snapshot folder's mtime (touched on use)
  std::set<std::string> blobs;  // the blob names its entries link to
};

struct CacheScan {
  std::map<std::string, std::map<std::string, uint64_t>> blobs;  // repo folder -> blob -> size
  std::map<std::string, absl::Time> blob_mtimes;                 // "REPO/BLOB" -> mtime
  std::vector<ScannedSnapshot> snapshots;
  std::set<std::string> in_use;  // StepKey()s of live pins and reservations
  uint64_t blob_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t swept_files = 0;  // stale files removed by this scan
};

// The file names the cache's bookkeeping uses (see source_cache.h's layout).
inline constexpr char kStateFolder[] = ".locks/anisoscope";
inline constexpr char kPinsFolder[] = "pins";
inline constexpr char kReservationsFolder[] = "reservations";
inline constexpr char kIncompleteSuffix[] = ".incomplete";

// True for a repo folder the cache counts and may evict from.
bool IsManagedRepoFolder(const std::string& name);

// Scans `root` (the cache folder), `pins` and `reservations` (open folders).
CacheScan ScanCache(int root, int pins, int reservations, absl::Duration stale_after);

}  // namespace anisoscope::cache
