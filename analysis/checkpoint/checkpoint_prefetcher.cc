#include "analysis/checkpoint/checkpoint_prefetcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "analysis/checkpoint/weight_files.h"

namespace anisoscope::analysis {
namespace {

// One read: small enough that a stop is noticed quickly and the buffer costs nothing.
constexpr size_t kChunkBytes = 4 << 20;

}  // namespace

bool ReadAheadFile(const std::filesystem::path& file, const std::atomic<bool>& stop) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat info {};
  bool read_all = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  if (read_all) {
    std::vector<char> buffer(kChunkBytes);
    for (off_t offset = 0; offset < info.st_size && !stop.load();) {
      const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), offset);
      if (got <= 0) {
        read_all = got == 0;  // 0: the file shrank; otherwise a read error
        break;
      }
      offset += got;
    }
  }
  ::close(fd);
  return read_all;
}

void CheckpointPrefetcher::Start(const std::filesystem::path& dir) {
  Stop();
  stop_ = false;
  reader_ = std::thread([this, dir] {
    ReadAheadFile(dir / "config.json", stop_);
    absl::StatusOr<WeightFiles> weights = FindWeightFiles(dir);
    if (!weights.ok()) return;
    if (!weights->index_path.empty()) ReadAheadFile(weights->index_path, stop_);
    for (const std::filesystem::path& file : weights->files) {
      if (stop_.load() || !ReadAheadFile(file, stop_)) return;
    }
  });
}

void CheckpointPrefetcher::Stop() {
  stop_ = true;
  if (reader_.joinable()) reader_.join();
}

}  // namespace anisoscope::analysis
