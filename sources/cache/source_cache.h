// SourceCache: the bounded cache of checkpoint files fetched from the Hugging Face Hub and
// S3, shared by the worker processes of one node (`--cache-dir DIR --cache-max-bytes N`).
// It writes no HTTP: the caller downloads into the file BeginFile() hands out.
//
// Layout (Hub repos exactly as huggingface_hub's file_download.py lays its cache out, so a
// user's ~/.cache/huggingface/hub is reused and theirs reads ours):
//   DIR/models--ORG--NAME/blobs/<etag>                  the file (LFS sha256, or git sha1)
//   DIR/models--ORG--NAME/snapshots/<commit>/<path>     -> ../../blobs/<etag> (one more
//                                                          "../" per folder in <path>)
//   DIR/models--ORG--NAME/refs/<revision>               the commit, no newline
//   DIR/s3--BUCKET/blobs/<etag>                         an object (its normalized ETag)
//   DIR/s3--BUCKET/snapshots/<S3SnapshotName(prefix)>/<path below the step's prefix>
//   DIR/<repo>/blobs/<etag>.<HOST~PID~START>.<random>.incomplete   a download in progress
//   DIR/.locks/anisoscope/{lock, pins/, reservations/}  the node's bookkeeping (.locks is
//                                                       what huggingface_hub's cache scan skips)
// A step (one revision's snapshot, or one step folder of a bucket) is the unit of use and of
// eviction; its snapshot folder is a checkpoint directory the engine can read (links lead
// only into the repo's blobs/).
//
// Between processes (no flock: it lies on NFS and Lustre):
// - Every change of the ledger (reserve, evict, commit, pin) runs under NodeLock, a lock
//   file made by link(2) that names its owner; a dead owner's lock is broken (node_lock.h).
// - The ledger is the disk itself, rescanned under the lock: blob sizes, plus reservation
//   files (one per download in progress, naming its bytes and step), plus pin files (one per
//   step in use). A record whose owner process died (same host; pid gone or reused) is
//   ignored and removed; a record from another host is honoured.
// - Each download writes its own `.incomplete` name (unique per process and attempt) and is
//   renamed into blobs/ atomically; when the blob is already there (another worker won),
//   the download is dropped.
// Guarantee: blob bytes plus reserved bytes never exceed `max_bytes` after any operation of
// this class, so the disk (blobs plus `.incomplete` files) exceeds it by at most what
// writers put past their reservation: nothing for a writer that stops at the expected size
// (transfer::FileSink does), and never more than one file per writer that does not.
// A pinned step is never evicted by any process of the node.
// Limits: only the repos the cache manages count (`models--*`, `s3--*`; a user's datasets
// and spaces are neither counted nor touched); a writer that is not a SourceCache (the
// huggingface_hub library) bypasses the bound; pins and locks of another host sharing DIR
// are honoured but cannot be checked for liveness (a stale lock from another host is broken
// after `stale_after`); the files' content is the caller's to check (sizes are checked
// here, hashes by the transfer).
//
// Thread-safe: a mutex serializes this object's use of the node lock. Every call but
// metrics() may block on the node lock (up to `lock_timeout`) and on disk I/O.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_gate.h"
#include "sources/cache/cache_names.h"
#include "sources/cache/cache_scan.h"
#include "sources/cache/node_lock.h"

namespace anisoscope::cache {

struct SourceCacheOptions {
  std::filesystem::path dir;  // --cache-dir; created when missing
  uint64_t max_bytes = 0;     // --cache-max-bytes: blobs plus downloads in progress
  // An `.incomplete` file unwritten this long, an unlinked blob this old, or a lock of
  // another host held this long belongs to a writer presumed dead.
  absl::Duration stale_after = absl::Hours(1);
  absl::Duration lock_timeout = absl::Minutes(2);  // waiting for the node lock
};

// One file of a step, as its listing gives it.
struct StepFile {
  std::string path;  // '/'-separated, relative to the step ("model.safetensors", "a/b.json")
  std::string etag;  // normalized (NormalizeEtag): the blob's name
  uint64_t size = 0;
};

// One step: a Hub revision's commit, or one step folder under an S3 prefix.
struct CacheStep {
  CacheRepo repo;        // HubModelRepo() or S3BucketRepo()
  std::string snapshot;  // Hub: the 40-hex commit; S3: S3SnapshotName(step prefix)
  std::string revision;  // Hub: the branch or tag to record in refs/; empty: none
  std::vector<StepFile> files;
};

struct SourceCacheMetrics {
  uint64_t bytes_cached = 0;    // the node's blob bytes, as of this object's last operation
  uint64_t bytes_reserved = 0;  // the node's downloads in progress, likewise
  uint64_t hits = 0;            // FindComplete() calls that found the step (this object)
  uint64_t misses = 0;          // FindComplete() calls that did not
  uint64_t evicted_steps = 0;   // steps this object evicted
  uint64_t evicted_bytes = 0;   // blob bytes those evictions removed
};

class SourceCache;

// A step marked in use: no process of the node evicts it until the pin is destroyed (once
// the unit's results are stored). Move-only.
class StepPin {
 public:
  StepPin(StepPin&& other) noexcept
      : step_(std::move(other.step_)), record_(std::exchange(other.record_, {})) {}
  StepPin& operator=(StepPin&& other) noexcept;
  ~StepPin();
  const CacheStep& step() const { return step_; }

 private:
  friend class SourceCache;
  StepPin(CacheStep step, std::filesystem::path record)
      : step_(std::move(step)), record_(std::move(record)) {}
  CacheStep step_;
  std::filesystem::path record_;  // empty once moved from
};

// A download in progress: the caller writes the file's bytes to fd() (at most the expected
// size), then hands it to CommitFile(). Dropped (file removed, reservation released) when
// destroyed uncommitted. Move-only.
class PendingBlob {
 public:
  PendingBlob(PendingBlob&& other) noexcept { *this = std::move(other); }
  PendingBlob& operator=(PendingBlob&& other) noexcept;
  ~PendingBlob();

  int fd() const { return fd_.get(); }  // open for writing, positioned at 0
  const std::filesystem::path& incomplete_path() const { return incomplete_path_; }
  const StepFile& file() const { return file_; }

 private:
  friend class SourceCache;
  PendingBlob() = default;
  CacheStep step_;  // repo and snapshot only
  StepFile file_;
  UniqueFd fd_;
  std::filesystem::path incomplete_path_;
  std::filesystem::path reservation_;
};

class SourceCache {
 public:
  // Opens (creating) `options.dir` and sweeps what dead writers left: `.incomplete` files,
  // pins, reservations, lock files. INVALID_ARGUMENT for a zero bound; INTERNAL when the
  // folder cannot be made or locked.
  static absl::StatusOr<std::unique_ptr<SourceCache>> Create(SourceCacheOptions options);

  // The step's snapshot folder when every file is there, linked to its blob with its
  // expected size (a hit, recency touched); NOT_FOUND otherwise (a miss). Reads the disk
  // only. PERMISSION_DENIED naming the entry when one is a link leading anywhere but the
  // repo's blobs/ (planted by someone else), INVALID_ARGUMENT for a hostile name.
  absl::StatusOr<std::filesystem::path> FindComplete(const CacheStep& step);

  // Marks the step in use (and most recently used) after checking every name in it.
  absl::StatusOr<StepPin> Pin(const CacheStep& step);

  // Prepares `file` of the pinned step. nullopt: its blob is already there with its size
  // (another step shares it, or another worker fetched it) and the snapshot entry now links
  // it. Otherwise reserves file.size, evicting least recently used steps not in use until it
  // fits, and opens a fresh `.incomplete` file for the download. RESOURCE_EXHAUSTED naming
  // the file, the step and the bound when the file alone exceeds the bound, or when the
  // steps in use and the downloads in progress leave too little room.
  absl::StatusOr<std::optional<PendingBlob>> BeginFile(const StepPin& pin, const StepFile& file);

  // Moves a finished download into blobs/ (or drops it when another worker's blob is there)
  // and links the snapshot entry; releases the reservation. DATA_LOSS naming the file when
  // its size is not the expected one (the download is removed).
  absl::Status CommitFile(PendingBlob blob);

  // After the last file: records the revision in refs/ and returns the snapshot folder;
  // FAILED_PRECONDITION naming the first missing file when the step is not complete.
  absl::StatusOr<std::filesystem::path> FinishStep(const StepPin& pin);

  // The node's blob and reserved bytes, rescanned now (sweeping dead writers' files).
  absl::StatusOr<SourceCacheMetrics> Refresh();
  SourceCacheMetrics metrics() const;

  const std::filesystem::path& dir() const { return options_.dir; }

 private:
  SourceCache(SourceCacheOptions options, UniqueFd root, UniqueFd pins, UniqueFd reservations);

  // Where errors name the step: "hub:ORG/NAME at COMMIT (revision main)".
  static std::string Where(const CacheStep& step);
  // Checks every name of the step (repo, snapshot, revision, files, etags).
  static absl::Status CheckStep(const CacheStep& step);
  // The step's completeness, as FindComplete() reports it, without counting.
  absl::StatusOr<std::filesystem::path> CheckComplete(const CacheStep& step) const;
  // Rescans under the lock (held) and records the totals in the metrics.
  CacheScan Rescan();
  // A record file in `dir` (pins/ or reservations/) with `content`; its path.
  absl::StatusOr<std::filesystem::path> WriteRecord(int dir, const char* folder,
                                                    const std::string& content);
  // Runs `work` holding the node lock (and this object's mutex).
  template <typename Work>
  auto Locked(Work work) -> decltype(work());

  const SourceCacheOptions options_;
  const UniqueFd root_;
  const UniqueFd pins_;
  const UniqueFd reservations_;
  std::mutex lock_mutex_;  // one node-lock acquisition at a time in this process
  NodeLock node_lock_;
  std::atomic<uint64_t> bytes_cached_{0};
  std::atomic<uint64_t> bytes_reserved_{0};
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> evicted_steps_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
};

}  // namespace anisoscope::cache
