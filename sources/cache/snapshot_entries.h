// A snapshot's entries, read and written without ever following a link out of the cache:
// each entry is a relative link into its repo's blobs/ (huggingface_hub's _create_symlink),
// folders on the way are opened with O_NOFOLLOW, and an entry that leads anywhere but the
// repo's blobs/ is refused rather than followed. Thread-compatible; callers hold the node
// lock for writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "sources/cache/source_cache.h"

namespace anisoscope::cache {

// Whether `file`'s entry in the step's snapshot links to blob `file.etag` of size
// `file.size`. OK: yes. NOT_FOUND: missing, not a link, linked to another blob of the repo,
// or the blob is absent or of another size. PERMISSION_DENIED: the entry, or a folder on its
// way, is a link that leads out of the repo's blobs/. `root_path` is the cache folder as
// spelled, `root` open on it; `where` names the step in errors.
absl::Status CheckEntry(const std::filesystem::path& root_path, int root, const CacheStep& step,
                        const StepFile& file, const std::string& where);

// Makes `file`'s entry in the step's snapshot a link to its blob (creating folders, replacing
// a wrong entry atomically). PERMISSION_DENIED when a folder on the way is a link or a file;
// FAILED_PRECONDITION when the entry is a folder.
absl::Status LinkEntry(int root, const CacheStep& step, const StepFile& file,
                       const std::string& where);

// Records `step.revision` -> `step.snapshot` in refs/ (tmp file + rename, as
// huggingface_hub's _cache_commit_hash_for_specific_revision); nothing when the revision is
// empty or is the snapshot's own name.
absl::Status WriteRef(int root, const CacheStep& step, const std::string& where);

}  // namespace anisoscope::cache
