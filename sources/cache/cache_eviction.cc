#include "sources/cache/cache_eviction.h"

#include <unistd.h>

#include <algorithm>
#include <optional>

#include "sources/cache/cache_dirs.h"

namespace anisoscope::cache {
namespace {

bool Fits(const CacheScan& scan, uint64_t need, uint64_t max_bytes) {
  return scan.blob_bytes + scan.reserved_bytes + need <= max_bytes;
}

bool LinkedByAnySnapshot(const CacheScan& scan, const std::string& repo, const std::string& blob) {
  for (const ScannedSnapshot& snapshot : scan.snapshots) {
    if (snapshot.repo_folder == repo && snapshot.blobs.count(blob) > 0) return true;
  }
  return false;
}

// Removes the files beneath refs/ that name `commit` (huggingface_hub's scan_cache_dir
// reports a ref to a missing snapshot as a corrupted cache).
void RemoveRefsTo(int refs, const std::string& commit, int depth) {
  if (depth > 16) return;
  for (const DirEntry& entry : ListDir(refs)) {
    if (entry.is_dir) {
      absl::StatusOr<UniqueFd> sub = OpenDirAt(refs, entry.name, false, entry.name);
      if (sub.ok()) RemoveRefsTo(sub->get(), commit, depth + 1);
    } else if (entry.is_file && ReadSmallAt(refs, entry.name, 256) == commit) {
      unlinkat(refs, entry.name.c_str(), 0);
    }
  }
}

uint64_t RemoveBlob(int root, const std::string& repo, const std::string& blob, CacheScan* scan) {
  absl::StatusOr<UniqueFd> blobs = OpenDirsAt(root, {repo, "blobs"}, false, repo);
  auto& sizes = scan->blobs[repo];
  const auto found = sizes.find(blob);
  if (!blobs.ok() || found == sizes.end()) return 0;
  if (unlinkat(blobs->get(), blob.c_str(), 0) != 0) return 0;
  const uint64_t size = found->second;
  sizes.erase(found);
  scan->blob_bytes -= size;
  return size;
}

}  // namespace

EvictionResult EvictSnapshot(int root, size_t index, CacheScan* scan) {
  EvictionResult result;
  const ScannedSnapshot victim = scan->snapshots[index];
  scan->snapshots.erase(scan->snapshots.begin() + static_cast<std::ptrdiff_t>(index));
  absl::StatusOr<UniqueFd> repo = OpenDirAt(root, victim.repo_folder, false, victim.repo_folder);
  if (!repo.ok()) return result;
  absl::StatusOr<UniqueFd> snapshots = OpenDirAt(repo->get(), "snapshots", false, "snapshots");
  if (snapshots.ok()) RemoveTreeAt(snapshots->get(), victim.name);
  absl::StatusOr<UniqueFd> refs = OpenDirAt(repo->get(), "refs", false, "refs");
  if (refs.ok()) RemoveRefsTo(refs->get(), victim.name, 0);
  result.steps = 1;
  for (const std::string& blob : victim.blobs) {
    if (!LinkedByAnySnapshot(*scan, victim.repo_folder, blob)) {
      result.bytes += RemoveBlob(root, victim.repo_folder, blob, scan);
    }
  }
  return result;
}

EvictionResult EvictUntilFits(int root, uint64_t need, uint64_t max_bytes,
                              absl::Duration stale_after, CacheScan* scan) {
  EvictionResult result;
  if (Fits(*scan, need, max_bytes)) return result;
  const absl::Time now = absl::Now();
  for (auto& [repo, sizes] : scan->blobs) {
    std::vector<std::string> orphans;
    for (const auto& [blob, size] : sizes) {
      const auto mtime = scan->blob_mtimes.find(StepKey(repo, blob));
      const bool old = mtime != scan->blob_mtimes.end() && now - mtime->second > stale_after;
      if (old && !LinkedByAnySnapshot(*scan, repo, blob)) orphans.push_back(blob);
    }
    for (const std::string& blob : orphans) result.bytes += RemoveBlob(root, repo, blob, scan);
  }
  while (!Fits(*scan, need, max_bytes)) {
    std::optional<size_t> oldest;
    for (size_t i = 0; i < scan->snapshots.size(); ++i) {
      const ScannedSnapshot& snapshot = scan->snapshots[i];
      if (scan->in_use.count(StepKey(snapshot.repo_folder, snapshot.name)) > 0) continue;
      if (!oldest.has_value() || snapshot.last_used < scan->snapshots[*oldest].last_used ||
          (snapshot.last_used == scan->snapshots[*oldest].last_used &&
           StepKey(snapshot.repo_folder, snapshot.name) <
               StepKey(scan->snapshots[*oldest].repo_folder, scan->snapshots[*oldest].name))) {
        oldest = i;
      }
    }
    if (!oldest.has_value()) break;
    const EvictionResult one = EvictSnapshot(root, *oldest, scan);
    result.steps += one.steps;
    result.bytes += one.bytes;
  }
  return result;
}

}  // namespace anisoscope::cache
