#include "sources/cache/cache_scan.h"

#include <fcntl.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sources/cache/cache_dirs.h"
#include "sources/cache/process_owner.h"

namespace anisoscope::cache {
namespace {

constexpr size_t kMaxRecordBytes = 1024;

// The owner of a bookkeeping file named "TOKEN.RANDOM".
std::optional<ProcessOwner> OwnerOfRecord(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  return ProcessOwner::Parse(absl::string_view(name).substr(0, dot));
}

// The owner of "ETAG.TOKEN.RANDOM.incomplete" (nullopt for another writer's naming, such as
// huggingface_hub's "ETAG.UUID8.incomplete").
std::optional<ProcessOwner> OwnerOfIncomplete(const std::string& name) {
  absl::string_view rest = name;
  rest.remove_suffix(sizeof(kIncompleteSuffix) - 1);
  const size_t first = rest.find('.');
  const size_t last = rest.rfind('.');
  if (first == std::string::npos || last <= first) return std::nullopt;
  return ProcessOwner::Parse(rest.substr(first + 1, last - first - 1));
}

// The blob names the links beneath `dir` lead to ("…/blobs/NAME").
void CollectLinkedBlobs(int dir, std::set<std::string>* blobs, int depth) {
  if (depth > 64) return;
  for (const DirEntry& entry : ListDir(dir)) {
    if (entry.is_link) {
      const std::optional<std::string> target = ReadLinkAt(dir, entry.name);
      if (!target.has_value()) continue;
      const std::vector<absl::string_view> parts = absl::StrSplit(*target, '/');
      if (parts.size() >= 2 && parts[parts.size() - 2] == "blobs") {
        blobs->insert(std::string(parts.back()));
      }
    } else if (entry.is_dir) {
      absl::StatusOr<UniqueFd> sub = OpenDirAt(dir, entry.name, false, entry.name);
      if (sub.ok()) CollectLinkedBlobs(sub->get(), blobs, depth + 1);
    }
  }
}

void ScanRepo(int root, const std::string& folder, absl::Duration stale_after, CacheScan* scan) {
  absl::StatusOr<UniqueFd> repo = OpenDirAt(root, folder, false, folder);
  if (!repo.ok()) return;
  std::map<std::string, uint64_t>& blobs = scan->blobs[folder];
  absl::StatusOr<UniqueFd> blob_dir = OpenDirAt(repo->get(), "blobs", false, folder);
  if (blob_dir.ok()) {
    const absl::Time now = absl::Now();
    for (const DirEntry& entry : ListDir(blob_dir->get())) {
      if (absl::EndsWith(entry.name, kIncompleteSuffix)) {
        const std::optional<ProcessOwner> owner = OwnerOfIncomplete(entry.name);
        const bool dead = owner.has_value() && !owner->MaybeAlive();
        if (dead || now - entry.mtime > stale_after) {
          if (unlinkat(blob_dir->get(), entry.name.c_str(), 0) == 0) ++scan->swept_files;
        }
        continue;
      }
      if (!entry.is_file) continue;
      blobs[entry.name] = entry.size;
      scan->blob_mtimes[StepKey(folder, entry.name)] = entry.mtime;
      scan->blob_bytes += entry.size;
    }
  }
  absl::StatusOr<UniqueFd> snapshots = OpenDirAt(repo->get(), "snapshots", false, folder);
  if (!snapshots.ok()) return;
  for (const DirEntry& entry : ListDir(snapshots->get())) {
    if (!entry.is_dir) continue;
    ScannedSnapshot snapshot{folder, entry.name, entry.mtime, {}};
    absl::StatusOr<UniqueFd> dir = OpenDirAt(snapshots->get(), entry.name, false, entry.name);
    if (dir.ok()) CollectLinkedBlobs(dir->get(), &snapshot.blobs, 0);
    scan->snapshots.push_back(std::move(snapshot));
  }
}

// Reads live pins or reservations; removes those of dead processes.
void ScanRecords(int dir, bool reservations, CacheScan* scan) {
  for (const DirEntry& entry : ListDir(dir)) {
    if (!entry.is_file) continue;
    const std::optional<ProcessOwner> owner = OwnerOfRecord(entry.name);
    if (owner.has_value() && !owner->MaybeAlive()) {
      if (unlinkat(dir, entry.name.c_str(), 0) == 0) ++scan->swept_files;
      continue;
    }
    const std::optional<std::string> text = ReadSmallAt(dir, entry.name, kMaxRecordBytes);
    if (!text.has_value()) continue;
    absl::string_view record = absl::StripSuffix(*text, "\n");
    if (reservations) {
      const size_t space = record.find(' ');
      uint64_t bytes = 0;
      if (space == std::string::npos || !absl::SimpleAtoi(record.substr(0, space), &bytes)) {
        continue;
      }
      scan->reserved_bytes += bytes;
      record.remove_prefix(space + 1);
    }
    scan->in_use.insert(std::string(record));
  }
}

}  // namespace

std::string StepKey(const std::string& repo_folder, const std::string& snapshot) {
  return absl::StrCat(repo_folder, "/", snapshot);
}

bool IsManagedRepoFolder(const std::string& name) {
  return absl::StartsWith(name, "models--") || absl::StartsWith(name, "s3--");
}

CacheScan ScanCache(int root, int pins, int reservations, absl::Duration stale_after) {
  CacheScan scan;
  for (const DirEntry& entry : ListDir(root)) {
    if (entry.is_dir && IsManagedRepoFolder(entry.name)) {
      ScanRepo(root, entry.name, stale_after, &scan);
    }
  }
  ScanRecords(pins, false, &scan);
  ScanRecords(reservations, true, &scan);
  return scan;
}

}  // namespace anisoscope::cache
