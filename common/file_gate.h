// FileGate: the one way a file is opened on a caller's behalf (a checkpoint, its config,
// weights and tokenizer files, a probe, a followed directory's listing), in the server and
// the worker alike.
//
// A gate made by Beneath() holds its roots open as directory descriptors and resolves every
// path beneath one of them at open time, with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS):
// a symbolic link swapped in after a path was checked, a link inside a checkpoint, an
// absolute link or a ".." cannot lead out of the root, and /proc magic links are refused.
// Relative links that stay beneath the root (a Hugging Face cache's snapshots/ into blobs/)
// are followed. A path is matched to a root lexically, as the root was spelled or as it
// resolves; a path outside every root and a missing one get the same answer
// (PERMISSION_DENIED naming only the path given), so the gate is no oracle of the disk.
//
// Host() is the process's own opener (the operator's command line, benchmarks, tests): any
// path, symlinks followed, errno in errors. Never use it for a path a caller sent.
//
// Copies share the root descriptors; immutable; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

// One entry of a directory listed through a gate (its type as seen through the gate).
struct GatedEntry {
  std::string name;
  bool is_directory = false;
  bool is_file = false;
  bool is_link = false;  // a symbolic link, whatever it leads to
};

class FileGate {
 public:
  // A gate over `roots`, each an existing directory (INVALID_ARGUMENT naming it otherwise).
  // No roots allows nothing.
  static absl::StatusOr<FileGate> Beneath(const std::vector<std::string>& roots);
  // The process's own files; see the file comment.
  static FileGate Host();

  // Opens a regular file for reading. PERMISSION_DENIED "'PATH' is not a file beneath an
  // allowed root: it does not exist or is outside the server's --allow-root" when it is
  // missing, outside, not a regular file or unreadable (one answer: no oracle of the disk).
  absl::StatusOr<UniqueFd> OpenFile(const std::filesystem::path& path) const;
  // Opens a directory (O_DIRECTORY), with the same answer as OpenFile otherwise.
  absl::StatusOr<UniqueFd> OpenDirectory(const std::filesystem::path& path) const;
  // The whole content of a regular file of at most `max_bytes`; a larger one is refused
  // unread (INVALID_ARGUMENT naming the path and the bound).
  absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, uint64_t max_bytes) const;

  bool IsFile(const std::filesystem::path& path) const { return OpenFile(path).ok(); }
  bool IsDirectory(const std::filesystem::path& path) const { return OpenDirectory(path).ok(); }
  // The size of a regular file, or an error as OpenFile's.
  absl::StatusOr<uint64_t> FileSize(const std::filesystem::path& path) const;

  // The entries of directory `path` ("." and ".." left out), each typed by opening it
  // through this gate (a link leading out of the roots is neither file nor directory).
  absl::StatusOr<std::vector<GatedEntry>> List(const std::filesystem::path& path) const;

  // A gate whose only root is `dir`, opened through this gate: reads beneath a folder the
  // caller named (a Hugging Face cache repository's refs/) open nothing outside it.
  absl::StatusOr<FileGate> Within(const std::filesystem::path& dir) const;

  // The roots that both this gate and `others` allow: for each of `others` lexically
  // beneath one of this gate's roots, that narrower root, opened beneath it with no
  // symbolic link on the way (a tenant who may write beneath a root cannot re-point its
  // narrower root); for each that holds one of this gate's roots, that root. Others that
  // are neither, or cannot be opened so, are left out (the gate may end with no root).
  // Host() intersected gives `others` as Beneath() would, or no root.
  FileGate Intersect(const std::vector<std::string>& others) const;

  // A gate over this gate's roots and `other`'s, each root as it was opened (no path is
  // resolved again): a worker's cache folder beside a unit's roots. Host() with anything is
  // Host().
  FileGate Union(const FileGate& other) const;

  // The roots as spelled (lexically normal), as paths beneath them are given; empty for
  // Host().
  std::vector<std::string> roots() const;
  bool restricted() const { return roots_ != nullptr; }

 private:
  struct Root {
    std::filesystem::path spelled;   // as given, lexically normal
    std::filesystem::path resolved;  // canonical at Beneath()
    std::shared_ptr<UniqueFd> fd;    // O_PATH | O_DIRECTORY
  };

  explicit FileGate(std::shared_ptr<const std::vector<Root>> roots) : roots_(std::move(roots)) {}

  // Opens `path` with `flags` beneath the root that lexically holds it.
  absl::StatusOr<UniqueFd> Open(const std::filesystem::path& path, int flags,
                                const char* kind) const;

  std::shared_ptr<const std::vector<Root>> roots_;  // null for Host()
};

}  // namespace anisoscope
