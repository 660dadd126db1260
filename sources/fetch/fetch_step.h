// What StepFetcher takes and gives: one step's files with where to get them, the fetched
// step (a pinned snapshot folder) and its figures, and the progress reported on the way.
// Plain data; the listings (sources/listing) fill FetchStep, the worker reads the rest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sources/cache/source_cache.h"

namespace anisoscope::fetch {

// Where one file of a step comes from.
struct FetchFile {
  // The Hub's `{endpoint}/{org}/{name}/resolve/{revision}/{path}`, or an S3 object's URL.
  std::string url;
  // 64 hex digits from the listing (the Hub's lfs.oid); empty: not checked (a non-LFS file,
  // whose size still is).
  std::string expected_sha256;
};

// One step to fetch. `files` is parallel to `cache_step.files` (same length, same order):
// cache_step.files[i] names the file in the cache (path, etag, size), files[i] says where it
// comes from. The listing's size is the hard bound on what reaches the disk.
struct FetchStep {
  cache::CacheStep cache_step;
  std::vector<FetchFile> files;
};

// What fetching one step cost.
struct FetchStats {
  bool cache_hit = false;        // the step was complete in the cache: no request made
  int64_t bytes_fetched = 0;     // body bytes received (retries and error bodies included)
  int64_t bytes_downloaded = 0;  // bytes of the files written by this fetch
  int files_downloaded = 0;      // files downloaded by this fetch
  int files_reused = 0;          // files whose blob was already in the cache
  int64_t retries = 0;           // attempts that followed a failed one
  double seconds = 0;            // wall time of the fetch
  double bytes_per_second = 0;   // bytes_fetched / seconds (0 for a hit)
};

// A step on local disk, pinned: no process of the node evicts it until this is destroyed,
// which the worker does once the step's results are stored. Move-only.
struct FetchedStep {
  cache::StepPin pin;
  // The cache's snapshot folder: a checkpoint directory the engine reads.
  std::filesystem::path folder;
  FetchStats stats;
};

// Reported while a step downloads (at most every TransferOptions::progress_interval per file,
// and once after each file): the worker's progress lines and /metrics come from here.
struct FetchProgress {
  std::string step;    // "hub:ORG/NAME revision R (commit C)": names, never secrets
  std::string file;    // the file downloading now (its path in the step)
  int file_index = 0;  // 0-based, of file_count
  int file_count = 0;
  int64_t file_bytes = 0;             // of that file, on disk so far
  int64_t file_size = 0;              // of that file, as listed
  int64_t step_bytes = 0;             // of the step's files, done or on disk so far
  int64_t step_size = 0;              // of the step's files, as listed
  double bytes_per_second = 0;        // this file's download rate so far
  uint64_t cache_bytes = 0;           // the node cache's blob bytes, as of its last operation
  uint64_t cache_reserved_bytes = 0;  // the node's downloads in progress, likewise
};

// Called on the fetching thread; must not block.
using FetchProgressCallback = std::function<void(const FetchProgress&)>;

}  // namespace anisoscope::fetch
