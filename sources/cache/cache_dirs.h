// Folder operations of the source cache, relative to an open folder and never through a
// symbolic link: every folder on the way is opened with O_NOFOLLOW | O_DIRECTORY, so a link
// planted where a folder should be (`snapshots/C/sub -> /etc`) is refused, and removals
// unlink links rather than what they point at. Errors name the path and errno, never a
// file's content. Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_gate.h"

namespace anisoscope::cache {

// One entry of a folder, typed without following links.
struct DirEntry {
  std::string name;
  bool is_dir = false;
  bool is_file = false;
  bool is_link = false;
  uint64_t size = 0;  // regular files
  absl::Time mtime;
};

// Opens folder `name` in `parent` (creating it, mode 0755, when `create`). `shown` names it in
// errors. FAILED_PRECONDITION when it is a link or not a folder; NOT_FOUND when missing.
absl::StatusOr<UniqueFd> OpenDirAt(int parent, const std::string& name, bool create,
                                   const std::string& shown);
// The same, one segment after another.
absl::StatusOr<UniqueFd> OpenDirsAt(int parent, const std::vector<std::string>& names, bool create,
                                    const std::string& shown);
// An absolute folder, opened following links (the operator's --cache-dir).
absl::StatusOr<UniqueFd> OpenRoot(const std::string& path, bool create);

// The entries of an open folder ("." and ".." left out); empty when unreadable.
std::vector<DirEntry> ListDir(int dir);
// `name` in `dir`, typed without following a link; nullopt when absent.
std::optional<DirEntry> StatAt(int dir, const std::string& name);
// The target of link `name` in `dir`; nullopt when it is not a link.
std::optional<std::string> ReadLinkAt(int dir, const std::string& name);
// Removes `name` in `dir` and, for a folder, everything beneath it (links unlinked, never
// followed). Returns the bytes of regular files removed.
uint64_t RemoveTreeAt(int dir, const std::string& name);
// Writes `content` to `name` in `dir` through a unique temporary name and rename(2), so a
// reader sees the old or the new content, never a part.
absl::Status WriteFileAtomicallyAt(int dir, const std::string& name, const std::string& content,
                                   const std::string& shown);
// Reads a small file (at most `max_bytes`) without following a link; nullopt otherwise.
std::optional<std::string> ReadSmallAt(int dir, const std::string& name, size_t max_bytes);
// Sets a folder's modification time to now (the cache's recency), without following a link.
void TouchAt(int dir, const std::string& name);

}  // namespace anisoscope::cache
