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

bool ReadAheadFile(const std::filesystem::path& file, const FileGate& gate,
                   const std::atomic<bool>& stop) {
  absl::StatusOr<UniqueFd> opened = gate.OpenFile(file);
  if (!opened.ok()) return false;
  const int fd = opened->get();
  struct stat info {};
  bool read_all = ::fstat(fd, &info) == 0;
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
  return read_all;
}

void CheckpointPrefetcher::Start(const std::filesystem::path& dir, const FileGate& gate) {
  Stop();
  stop_ = false;
  reader_ = std::thread([this, dir, gate] {
    ReadAheadFile(dir / "config.json", gate, stop_);
    absl::StatusOr<WeightFiles> weights = FindWeightFiles(dir, gate);
    if (!weights.ok()) return;
    if (!weights->index_path.empty()) ReadAheadFile(weights->index_path, gate, stop_);
    for (const std::filesystem::path& file : weights->files) {
      if (stop_.load() || !ReadAheadFile(file, gate, stop_)) return;
    }
  });
}

void CheckpointPrefetcher::Stop() {
  stop_ = true;
  if (reader_.joinable()) reader_.join();
}

}  // namespace anisoscope::analysis
