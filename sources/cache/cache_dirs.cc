#include "sources/cache/cache_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"

namespace anisoscope::cache {
namespace {

absl::Status Errno(int error, const std::string& shown, const char* what) {
  const std::string text = absl::StrCat(shown, ": ", what, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(text);
  if (error == ELOOP || error == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat(shown, ": ", what, ": a link or a file stands where a folder should be"));
  }
  return absl::InternalError(text);
}

}  // namespace

absl::StatusOr<UniqueFd> OpenDirAt(int parent, const std::string& name, bool create,
                                   const std::string& shown) {
  if (create && mkdirat(parent, name.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno(errno, shown, "cannot create the folder");
  }
  const int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno(errno, shown, "cannot open the folder");
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> OpenDirsAt(int parent, const std::vector<std::string>& names, bool create,
                                    const std::string& shown) {
  UniqueFd current(fcntl(parent, F_DUPFD_CLOEXEC, 0));
  if (current.get() < 0) return Errno(errno, shown, "cannot open the folder");
  for (const std::string& name : names) {
    absl::StatusOr<UniqueFd> next = OpenDirAt(current.get(), name, create, shown);
    if (!next.ok()) return next.status();
    current = std::move(next).value();
  }
  return current;
}

absl::StatusOr<UniqueFd> OpenRoot(const std::string& path, bool create) {
  if (create) {
    std::error_code error;
    std::filesystem::create_directories(path, error);
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, path, "cannot open the cache folder");
  return UniqueFd(fd);
}

std::vector<DirEntry> ListDir(int dir) {
  std::vector<DirEntry> entries;
  const int copy = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return entries;
  DIR* stream = fdopendir(copy);
  if (stream == nullptr) {
    close(copy);
    return entries;
  }
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::optional<DirEntry> typed = StatAt(dir, name);
    if (typed.has_value()) entries.push_back(std::move(*typed));
  }
  closedir(stream);
  return entries;
}

std::optional<DirEntry> StatAt(int dir, const std::string& name) {
  struct stat st {};
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  DirEntry entry;
  entry.name = name;
  entry.is_dir = S_ISDIR(st.st_mode);
  entry.is_file = S_ISREG(st.st_mode);
  entry.is_link = S_ISLNK(st.st_mode);
  entry.size = entry.is_file ? static_cast<uint64_t>(st.st_size) : 0;
  entry.mtime = absl::TimeFromTimespec(st.st_mtim);
  return entry;
}

std::optional<std::string> ReadLinkAt(int dir, const std::string& name) {
  char target[4096];
  const ssize_t length = readlinkat(dir, name.c_str(), target, sizeof(target));
  if (length < 0 || static_cast<size_t>(length) >= sizeof(target)) return std::nullopt;
  return std::string(target, static_cast<size_t>(length));
}

uint64_t RemoveTreeAt(int dir, const std::string& name) {
  const std::optional<DirEntry> entry = StatAt(dir, name);
  if (!entry.has_value()) return 0;
  if (!entry->is_dir) {
    return unlinkat(dir, name.c_str(), 0) == 0 ? entry->size : 0;
  }
  uint64_t removed = 0;
  const int sub = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub >= 0) {
    for (const DirEntry& child : ListDir(sub)) removed += RemoveTreeAt(sub, child.name);
    close(sub);
  }
  unlinkat(dir, name.c_str(), AT_REMOVEDIR);
  return removed;
}

absl::Status WriteFileAtomicallyAt(int dir, const std::string& name, const std::string& content,
                                   const std::string& shown) {
  const std::string temp = absl::StrCat(".", RandomId128().substr(0, 16), ".tmp");
  const int fd =
      openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(errno, shown, "cannot write");
  const bool written =
      write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  const int error = errno;
  close(fd);
  if (!written || renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    const int last = written ? errno : error;
    unlinkat(dir, temp.c_str(), 0);
    return Errno(last, shown, "cannot write");
  }
  return absl::OkStatus();
}

std::optional<std::string> ReadSmallAt(int dir, const std::string& name, size_t max_bytes) {
  // O_NONBLOCK: a FIFO planted under the name cannot hold the reader.
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text(max_bytes + 1, '\0');
  const ssize_t got = read(fd, text.data(), text.size());
  close(fd);
  if (got < 0 || static_cast<size_t>(got) > max_bytes) return std::nullopt;
  text.resize(static_cast<size_t>(got));
  return text;
}

void TouchAt(int dir, const std::string& name) {
  utimensat(dir, name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

}  // namespace anisoscope::cache
