// Helpers of the source cache's tests: steps with made-up etags, a download written the
// way the transfer writes one (to the fd BeginFile hands out), and the disk's own count of
// the bytes the bound covers.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sources/cache/source_cache.h"

namespace anisoscope::cache::testing {

// A 64-hex "sha256" for `seed` (the cache never hashes: names are the listing's).
inline std::string FakeSha256(const std::string& seed) {
  const size_t h = std::hash<std::string>()(seed);
  std::string hex;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&hex, absl::Hex(h + i, absl::kZeroPad16));
  return hex;
}

// The 40-hex commit for `seed`.
inline std::string FakeCommit(const std::string& seed) {
  return FakeSha256("commit " + seed).substr(0, 40);
}

// The bytes of a file: `size` bytes derived from its etag.
inline std::string ContentOf(const StepFile& file) {
  std::string content(file.size, '\0');
  for (size_t i = 0; i < content.size(); ++i) {
    content[i] = static_cast<char>(file.etag[i % file.etag.size()] + i % 7);
  }
  return content;
}

inline CacheStep HubStep(const std::string& repo_id, const std::string& seed,
                         std::vector<StepFile> files, const std::string& revision = "") {
  CacheStep step;
  step.repo = HubModelRepo(repo_id).value();
  step.snapshot = FakeCommit(seed);
  step.revision = revision;
  step.files = std::move(files);
  return step;
}

inline StepFile File(const std::string& path, const std::string& seed, uint64_t size) {
  return StepFile{path, FakeSha256(seed), size};
}

// Downloads every file of the pinned step the way a worker does, then finishes the step.
inline absl::StatusOr<std::filesystem::path> Fetch(SourceCache& cache, const StepPin& pin) {
  for (const StepFile& file : pin.step().files) {
    absl::StatusOr<std::optional<PendingBlob>> pending = cache.BeginFile(pin, file);
    if (!pending.ok()) return pending.status();
    if (!pending->has_value()) continue;
    const std::string content = ContentOf(file);
    if (write((*pending)->fd(), content.data(), content.size()) !=
        static_cast<ssize_t>(content.size())) {
      return absl::InternalError("short write");
    }
    absl::Status committed = cache.CommitFile(std::move(**pending));
    if (!committed.ok()) return committed;
  }
  return cache.FinishStep(pin);
}

// Pins, finds or fetches, and returns the pin (the step stays in use while it lives).
inline absl::StatusOr<StepPin> PinAndFetch(SourceCache& cache, const CacheStep& step) {
  absl::StatusOr<StepPin> pin = cache.Pin(step);
  if (!pin.ok()) return pin.status();
  if (cache.FindComplete(step).ok()) return pin;
  absl::StatusOr<std::filesystem::path> fetched = Fetch(cache, *pin);
  if (!fetched.ok()) return fetched.status();
  return pin;
}

// What the bound covers, counted from the disk: every regular file in a managed repo's
// blobs/ (finished blobs and `.incomplete` downloads).
inline uint64_t DiskBytes(const std::filesystem::path& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (const auto& repo : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = repo.path().filename().string();
    if (name.rfind("models--", 0) != 0 && name.rfind("s3--", 0) != 0) continue;
    std::error_code inner;
    for (const auto& blob : std::filesystem::directory_iterator(repo.path() / "blobs", inner)) {
      struct stat st {};
      if (lstat(blob.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) bytes += st.st_size;
    }
  }
  return bytes;
}

// The whole content of a file read through its snapshot path (links followed).
inline std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void SetMtime(const std::filesystem::path& path, absl::Time when) {
  const timespec times[2] = {absl::ToTimespec(when), absl::ToTimespec(when)};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

}  // namespace anisoscope::cache::testing
