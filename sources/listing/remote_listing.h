// What a listing of a remote checkpoint series says (issue 38 items 1 and 5): the steps a Hub
// repo's branches, a suite of Hub repos or an S3 prefix's folders hold, each with the files a
// worker fetches, the names that carry no step, the steps that cannot be used and why, and
// the steps whose weights are the same bytes. Built from listings alone: no weight byte is
// downloaded. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sources/transfer/transfer_options.h"

namespace anisoscope::listing {

struct RemoteFile {
  std::string path;    // relative to the step, checked (listing_paths.h); '/'-separated
  uint64_t size = 0;   // as the listing says; the download holds the file to it
  std::string sha256;  // Hub: the LFS oid (64 hex); empty for a non-LFS file and on S3
  // The name the Hugging Face cache gives the blob: the LFS sha256, else the git blob oid
  // (Hub); the ETag without quotes (S3).
  std::string etag;
  std::string url;  // where a worker downloads it (Hub: resolve/{commit}/...; S3: the key)
};

struct RemoteStep {
  int64_t step = 0;
  std::string name;    // the branch (--hub), the repo (--hub-repos) or the S3 folder name
  std::string repo;    // ORG/NAME (Hub) or the bucket (S3)
  std::string commit;  // the Hub commit the files were listed at; empty on S3
  // The revision asked for: the branch (--hub), "main" or the given one (--hub-repos), the
  // folder's key prefix "PREFIX/step100/" (S3).
  std::string revision;
  std::vector<RemoteFile> files;  // what a checkpoint needs (checkpoint_files.h), by path
};

// A step that is listed by name but cannot be used: its listing failed, named a hostile
// path, or holds no weights. Never in SourceListing::steps.
struct ListingProblem {
  std::string name;  // the branch, repo or folder
  int64_t step = 0;
  std::string reason;  // names repo, revision and file; never a file's content or a secret
};

// Steps whose weight files are the same bytes (duplicates.h says how that is decided).
struct DuplicateGroup {
  std::vector<std::string> names;  // in step order; at least two
};

// What a listing cost, for the caller's metrics.
struct ListingCounters {
  int64_t requests = 0;  // GETs made (each page counts once; retries are in transfer)
  int64_t pages = 0;     // pages of paginated listings (refs, models, trees, S3 lists)
  transfer::TransferCounters transfer;  // attempts, retries, redirects, bytes
};

struct SourceListing {
  // Sorted by step; names unique, steps unique; every name, revision and path checked.
  std::vector<RemoteStep> steps;
  // Names seen that carry no step (e.g. "main"), as the source wrote them, unchecked:
  // escape them before printing.
  std::vector<std::string> without_step;
  std::vector<ListingProblem> problems;  // sorted by step
  std::vector<DuplicateGroup> duplicates;
  ListingCounters counters;
};

}  // namespace anisoscope::listing
