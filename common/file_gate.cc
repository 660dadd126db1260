#include "common/file_gate.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace anisoscope {
namespace {

namespace fs = std::filesystem;

// `path` lexically normal and without a trailing separator ("/srv/ckpt/" -> "/srv/ckpt").
fs::path Normal(const fs::path& path) {
  fs::path normal = path.lexically_normal();
  if (normal.has_relative_path() && normal.filename().empty()) normal = normal.parent_path();
  return normal;
}

// `path` relative to `root` (both Normal) when `path` lies lexically inside it.
bool RelativeTo(const fs::path& path, const fs::path& root, fs::path* relative) {
  if (root.empty()) return false;
  auto path_it = path.begin();
  for (auto root_it = root.begin(); root_it != root.end(); ++root_it, ++path_it) {
    if (path_it == path.end() || *path_it != *root_it) return false;
  }
  fs::path rest;
  for (; path_it != path.end(); ++path_it) {
    if (!path_it->empty()) rest /= *path_it;
  }
  *relative = rest.empty() ? fs::path(".") : rest;
  return true;
}

// openat2 beneath `root_fd`; `resolve` adds to RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS.
int OpenBeneath(int root_fd, const fs::path& relative, int flags, uint64_t resolve = 0) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | resolve;
  // EAGAIN: a rename or mount raced the lookup; a few tries, never a spin.
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, root_fd, relative.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN || attempt == 8) return static_cast<int>(fd);
  }
}

bool IsWithin(const fs::path& path, const fs::path& root) {
  fs::path ignored;
  return RelativeTo(path, root, &ignored);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::StatusOr<FileGate> FileGate::Beneath(const std::vector<std::string>& roots) {
  auto opened = std::make_shared<std::vector<Root>>();
  for (const std::string& root : roots) {
    std::error_code error;
    const fs::path resolved = fs::canonical(root, error);
    const int fd = error ? -1 : ::open(resolved.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("allowed root '", root, "' is not an existing directory"));
    }
    opened->push_back({Normal(root), resolved, std::make_shared<UniqueFd>(fd)});
  }
  return FileGate(std::move(opened));
}

FileGate FileGate::Host() { return FileGate(nullptr); }

FileGate FileGate::Union(const FileGate& other) const {
  if (roots_ == nullptr || other.roots_ == nullptr) return Host();
  auto both = std::make_shared<std::vector<Root>>(*roots_);
  both->insert(both->end(), other.roots_->begin(), other.roots_->end());
  return FileGate(std::move(both));
}

absl::StatusOr<UniqueFd> FileGate::Open(const fs::path& path, int flags, const char* kind) const {
  const bool want_directory = (flags & O_DIRECTORY) != 0;
  int fd = -1;
  if (roots_ == nullptr) {
    fd = ::open(path.c_str(), flags);
    if (fd < 0) {
      const int err = errno;
      const std::string message =
          absl::StrCat(path.string(), ": cannot open: ", std::strerror(err));
      return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
    }
  } else if (path.is_absolute()) {
    const fs::path normal = Normal(path);
    fs::path relative;
    for (const Root& root : *roots_) {
      for (const fs::path* spelling : {&root.spelled, &root.resolved}) {
        if (fd < 0 && RelativeTo(normal, *spelling, &relative)) {
          fd = OpenBeneath(root.fd->get(), relative, flags);
        }
      }
      if (fd >= 0) break;
    }
  }
  UniqueFd owned(fd);
  struct stat info {};
  const bool right_kind = fd >= 0 && ::fstat(fd, &info) == 0 &&
                          (want_directory ? S_ISDIR(info.st_mode) : S_ISREG(info.st_mode));
  if (!right_kind && roots_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a ", kind));
  }
  if (!right_kind) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path.string(), "' is not a ", kind, " beneath an allowed root: it does "
                     "not exist or is outside the server's --allow-root"));
  }
  return owned;
}

absl::StatusOr<UniqueFd> FileGate::OpenFile(const fs::path& path) const {
  // O_NONBLOCK: a FIFO in a file's place must not block the open (no effect on files).
  return Open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, "file");
}

absl::StatusOr<UniqueFd> FileGate::OpenDirectory(const fs::path& path) const {
  return Open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, "directory");
}

absl::StatusOr<uint64_t> FileGate::FileSize(const fs::path& path) const {
  absl::StatusOr<UniqueFd> fd = OpenFile(path);
  if (!fd.ok()) return fd.status();
  struct stat info {};
  if (::fstat(fd->get(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path.string(), "': cannot stat"));
  }
  return static_cast<uint64_t>(info.st_size);
}

absl::StatusOr<std::string> FileGate::ReadFile(const fs::path& path, uint64_t max_bytes) const {
  absl::StatusOr<UniqueFd> fd = OpenFile(path);
  if (!fd.ok()) return fd.status();
  struct stat info {};
  if (::fstat(fd->get(), &info) != 0 || static_cast<uint64_t>(info.st_size) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path.string(), "' is larger than ", max_bytes, " bytes"));
  }
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::read(fd->get(), text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", path.string(), "': cannot read"));
    }
    if (got == 0) break;  // shrank meanwhile
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

absl::StatusOr<std::vector<GatedEntry>> FileGate::List(const fs::path& path) const {
  absl::StatusOr<UniqueFd> fd = OpenDirectory(path);
  if (!fd.ok()) return fd.status();
  DIR* dir = ::fdopendir(fd->get());
  if (dir == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", path.string(), "': cannot list"));
  }
  fd->release();  // closedir closes it
  std::vector<GatedEntry> entries;
  while (const dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool is_link = entry->d_type == DT_LNK;
    if (entry->d_type == DT_UNKNOWN) {  // some file systems leave the type to a stat
      struct stat info {};
      is_link = ::fstatat(::dirfd(dir), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(info.st_mode);
    }
    entries.push_back({std::move(name), false, false, is_link});
  }
  ::closedir(dir);
  for (GatedEntry& entry : entries) {
    const fs::path child = path / entry.name;
    entry.is_directory = IsDirectory(child);
    entry.is_file = !entry.is_directory && IsFile(child);
  }
  return entries;
}

absl::StatusOr<FileGate> FileGate::Within(const fs::path& dir) const {
  absl::StatusOr<UniqueFd> fd = Open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC, "directory");
  if (!fd.ok()) return fd.status();
  const fs::path normal = Normal(dir);
  auto roots = std::make_shared<std::vector<Root>>();
  roots->push_back({normal, normal, std::make_shared<UniqueFd>(std::move(*fd))});
  return FileGate(std::move(roots));
}

FileGate FileGate::Intersect(const std::vector<std::string>& others) const {
  if (roots_ == nullptr) {
    absl::StatusOr<FileGate> gate = Beneath(others);
    return gate.ok() ? *std::move(gate) : FileGate(std::make_shared<std::vector<Root>>());
  }
  auto both = std::make_shared<std::vector<Root>>();
  for (const std::string& other : others) {
    const fs::path theirs = Normal(other);
    if (!theirs.is_absolute()) continue;
    for (const Root& mine : *roots_) {
      fs::path relative;
      if (RelativeTo(theirs, mine.spelled, &relative) ||
          RelativeTo(theirs, mine.resolved, &relative)) {
        // Opened beneath this root with no symbolic link on the way: whoever may write
        // beneath it cannot turn the narrower root into a link elsewhere.
        const int fd = OpenBeneath(mine.fd->get(), relative, O_PATH | O_DIRECTORY | O_CLOEXEC,
                                   RESOLVE_NO_SYMLINKS);
        if (fd >= 0) {
          both->push_back({theirs, mine.resolved / relative, std::make_shared<UniqueFd>(fd)});
        }
        break;
      }
      if (IsWithin(mine.spelled, theirs) || IsWithin(mine.resolved, theirs)) {
        both->push_back(mine);
        break;
      }
    }
  }
  return FileGate(std::move(both));
}

std::vector<std::string> FileGate::roots() const {
  std::vector<std::string> spelled;
  if (roots_ != nullptr) {
    for (const Root& root : *roots_) spelled.push_back(root.spelled.string());
  }
  return spelled;
}

}  // namespace anisoscope
