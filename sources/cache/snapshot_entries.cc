#include "sources/cache/snapshot_entries.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "sources/cache/cache_dirs.h"

namespace anisoscope::cache {
namespace {

std::string Quoted(const std::string& path) {
  return absl::StrCat("'", absl::CHexEscape(path), "'");
}

// The open folder an entry sits in (snapshot + the path's folders), and its segments.
struct EntryPlace {
  UniqueFd dir;
  std::vector<std::string> segments;
};

absl::StatusOr<EntryPlace> OpenEntryPlace(int root, const CacheStep& step, const StepFile& file,
                                          bool create, const std::string& where) {
  ASSIGN_OR_RETURN(std::vector<std::string> segments, FileSegments(file.path, where));
  std::vector<std::string> folders = {step.repo.folder, "snapshots", step.snapshot};
  folders.insert(folders.end(), segments.begin(), segments.end() - 1);
  absl::StatusOr<UniqueFd> dir = OpenDirsAt(root, folders, create, where);
  if (absl::IsFailedPrecondition(dir.status())) {
    return absl::PermissionDeniedError(
        absl::StrCat(where, ": file ", Quoted(file.path),
                     " passes through a link or a file where the cache has a folder; refused"));
  }
  if (!dir.ok()) return dir.status();
  return EntryPlace{std::move(dir).value(), std::move(segments)};
}

absl::Status Missing(const StepFile& file, const std::string& where, const char* why) {
  return absl::NotFoundError(absl::StrCat(where, ": file ", Quoted(file.path), " ", why));
}

}  // namespace

absl::Status CheckEntry(const std::filesystem::path& root_path, int root, const CacheStep& step,
                        const StepFile& file, const std::string& where) {
  RETURN_IF_ERROR(CheckEtag(file.etag, where));
  ASSIGN_OR_RETURN(EntryPlace place, OpenEntryPlace(root, step, file, false, where));
  const std::string& leaf = place.segments.back();
  const std::optional<std::string> target = ReadLinkAt(place.dir.get(), leaf);
  if (!target.has_value()) return Missing(file, where, "is not in the cache");
  if (*target != BlobLinkTarget(place.segments.size() - 1, file.etag)) {
    // Another spelling (an absolute link from an older huggingface_hub) is accepted only
    // when it names this repo's blobs/ folder, lexically: folders on the way are no links.
    const std::filesystem::path repo = root_path / step.repo.folder;
    std::filesystem::path entry_dir = repo / "snapshots" / step.snapshot;
    for (size_t i = 0; i + 1 < place.segments.size(); ++i) entry_dir /= place.segments[i];
    const std::filesystem::path target_path(*target);
    const std::filesystem::path resolved =
        (target_path.is_absolute() ? target_path : entry_dir / target_path).lexically_normal();
    std::error_code error;
    const std::filesystem::path canonical_root = std::filesystem::canonical(root_path, error);
    const bool in_blobs =
        resolved.parent_path() == (repo / "blobs").lexically_normal() ||
        (!error && resolved.parent_path() == canonical_root / step.repo.folder / "blobs");
    if (!in_blobs) {
      return absl::PermissionDeniedError(
          absl::StrCat(where, ": snapshot entry ", Quoted(file.path),
                       " is a link that leads outside the repo's blobs/; refused"));
    }
    if (resolved.filename() != file.etag) {
      return Missing(file, where, "links another blob (an older version of the file)");
    }
  }
  ASSIGN_OR_RETURN(UniqueFd blobs, OpenDirsAt(root, {step.repo.folder, "blobs"}, false, where));
  const std::optional<DirEntry> blob = StatAt(blobs.get(), file.etag);
  if (!blob.has_value() || !blob->is_file) return Missing(file, where, "has no blob in the cache");
  if (blob->size != file.size) {
    return Missing(file, where,
                   absl::StrCat("has a blob of ", blob->size, " bytes, not ", file.size).c_str());
  }
  return absl::OkStatus();
}

absl::Status LinkEntry(int root, const CacheStep& step, const StepFile& file,
                       const std::string& where) {
  ASSIGN_OR_RETURN(EntryPlace place, OpenEntryPlace(root, step, file, true, where));
  const int dir = place.dir.get();
  const std::string& leaf = place.segments.back();
  const std::string target = BlobLinkTarget(place.segments.size() - 1, file.etag);
  const std::optional<DirEntry> existing = StatAt(dir, leaf);
  if (existing.has_value() && existing->is_dir) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": file ", Quoted(file.path), " is a folder in the cached snapshot"));
  }
  if (existing.has_value() && ReadLinkAt(dir, leaf) == target) return absl::OkStatus();
  if (!existing.has_value() && symlinkat(target.c_str(), dir, leaf.c_str()) == 0) {
    return absl::OkStatus();
  }
  // A wrong entry (a planted link, a stale blob's link): replaced in one rename, so a reader
  // sees the old entry or the new one.
  const std::string temp = absl::StrCat(".", RandomId128().substr(0, 16), ".link");
  if (symlinkat(target.c_str(), dir, temp.c_str()) != 0 ||
      renameat(dir, temp.c_str(), dir, leaf.c_str()) != 0) {
    const int error = errno;
    unlinkat(dir, temp.c_str(), 0);
    return absl::InternalError(
        absl::StrCat(where, ": cannot link file ", Quoted(file.path), ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status WriteRef(int root, const CacheStep& step, const std::string& where) {
  if (step.revision.empty() || step.revision == step.snapshot) return absl::OkStatus();
  RETURN_IF_ERROR(CheckRevision(step.revision, where));
  ASSIGN_OR_RETURN(std::vector<std::string> segments, FileSegments(step.revision, where));
  std::vector<std::string> folders = {step.repo.folder, "refs"};
  folders.insert(folders.end(), segments.begin(), segments.end() - 1);
  absl::StatusOr<UniqueFd> dir = OpenDirsAt(root, folders, true, where);
  if (absl::IsFailedPrecondition(dir.status())) {
    return absl::PermissionDeniedError(absl::StrCat(where, ": revision ", Quoted(step.revision),
                                                    " passes through a link in refs/; refused"));
  }
  if (!dir.ok()) return dir.status();
  if (ReadSmallAt(dir->get(), segments.back(), 256) == step.snapshot) return absl::OkStatus();
  return WriteFileAtomicallyAt(dir->get(), segments.back(), step.snapshot,
                               absl::StrCat(where, ": refs/", step.revision));
}

}  // namespace anisoscope::cache
